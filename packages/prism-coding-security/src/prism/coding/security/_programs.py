"""What each known program does with its arguments: the safe set and the wrappers.

For every program the policy knows, a model turns an argv into a :class:`Use`:
which operands and option values are paths it reads or writes, whether it
changes directory, which commands it runs (wrappers, ``sh -c``), and whether it
is proved safe or must ask (unknown option, code from an argument, a write the
model cannot bound). A program with no model is never proved safe.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from typing import TYPE_CHECKING, Literal

import attrs

from ._argv import Grammar, ParsedArgs, grammar, parse_args

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "SAFE_PROGRAMS",
    "SHELLS",
    "WRAPPERS",
    "Inner",
    "Use",
    "describe",
    "model_args",
]

Argv = tuple["str | None", ...]


@attrs.frozen
class Inner:
    """A command another command runs: an argv, or a script in some shell's syntax."""

    argv: Argv | None = None
    script: str | None = None
    bash_syntax: bool = True
    transparent: bool = True  # the outer layer adds nothing unsafe


@attrs.frozen
class Use:
    """What an invocation does, as far as its model can tell."""

    verdict: Literal["allow", "ask"]
    reason: str
    rule: str
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    cwd: str | None = None
    inner: tuple[Inner, ...] = ()
    writer: bool = False  # the program writes (asks in read-only mode)
    files_only: tuple[str, ...] = ()  # operands that must not be directories (cp, mv)


def _ask(name: str, reason: str, *, inner: tuple[Inner, ...] = (), rule: str = "") -> Use:
    return Use(verdict="ask", reason=reason, rule=rule or f"model:{name}", inner=inner)


def _allow(name: str, reason: str = "", *, reads: tuple[str, ...] = ()) -> Use:
    return Use(
        verdict="allow",
        reason=reason or f"{name} is in the safe set",
        rule=f"model:{name}",
        reads=reads,
    )


# -- option grammars -------------------------------------------------------------------

_COLOR = "--color=?|--colour=?"
_G: dict[str, Grammar] = {
    "ls": grammar(
        "-a|--all -A|--almost-all --author -b|--escape --block-size= -B|--ignore-backups -c -C"
        " " + _COLOR + " -d|--directory -D|--dired -f -F|--classify=? --file-type --format="
        " --full-time -g --group-directories-first -G|--no-group -h|--human-readable --si"
        " -H|--dereference-command-line --dereference-command-line-symlink-to-dir --hide="
        " --hyperlink=? --indicator-style= -i|--inode -I|--ignore= -k|--kibibytes -l -m"
        " -n|--numeric-uid-gid -N|--literal -o -p -q|--hide-control-chars --show-control-chars"
        " -Q|--quote-name --quoting-style= -r|--reverse -R|--recursive -s|--size -S --sort="
        " --time= --time-style= -t -T|--tabsize= -u -U -v -w|--width= -x -X -Z|--context"
        " --zero -1 x:-L|--dereference"
    ),
    "cat": grammar(
        "-A|--show-all -b|--number-nonblank -e -E|--show-ends -n|--number -s|--squeeze-blank"
        " -t -T|--show-tabs -u -v|--show-nonprinting"
    ),
    "head": grammar(
        "-c|--bytes= -n|--lines= -q|--quiet|--silent -v|--verbose -z|--zero-terminated",
        numeric=True,
    ),
    "tail": grammar(
        "-c|--bytes= -f|--follow=? -F -n|--lines= --max-unchanged-stats= --pid= --retry"
        " -q|--quiet|--silent -s|--sleep-interval= -v|--verbose -z|--zero-terminated",
        numeric=True,
    ),
    "wc": grammar(
        "-c|--bytes -m|--chars -l|--lines -L|--max-line-length -w|--words --total= x:--files0-from="
    ),
    "grep": grammar(
        "-E|--extended-regexp -F|--fixed-strings -G|--basic-regexp -P|--perl-regexp"
        " -e|--regexp= r:-f|--file= -i|--ignore-case --no-ignore-case -y -v|--invert-match"
        " -w|--word-regexp -x|--line-regexp -c|--count " + _COLOR + " -L|--files-without-match"
        " -l|--files-with-matches -m|--max-count= -o|--only-matching -q|--quiet|--silent"
        " -s|--no-messages -b|--byte-offset -H|--with-filename -h|--no-filename --label="
        " -n|--line-number --line-buffered -T|--initial-tab -Z|--null -A|--after-context="
        " -B|--before-context= -C|--context= --group-separator= --no-group-separator -a|--text"
        " --binary-files= -D|--devices= -d|--directories= --exclude= r:--exclude-from="
        " --exclude-dir= -I --include= -r|--recursive -U|--binary -z|--null-data"
        " x:-R|--dereference-recursive",
        numeric=True,
    ),
    "rg": grammar(
        "-e|--regexp= r:-f|--file= -i|--ignore-case -S|--smart-case -s|--case-sensitive"
        " -v|--invert-match -w|--word-regexp -x|--line-regexp -F|--fixed-strings -c|--count"
        " --count-matches -l|--files-with-matches --files-without-match -o|--only-matching"
        " -q|--quiet -n|--line-number -N|--no-line-number -H|--with-filename -I|--no-filename"
        " -A|--after-context= -B|--before-context= -C|--context= -m|--max-count="
        " -g|--glob= --iglob= -t|--type= -T|--type-not= --type-list -u|--unrestricted"
        " --hidden --no-hidden --no-ignore --no-ignore-vcs --no-ignore-dot --no-ignore-parent"
        " --no-ignore-global --no-ignore-exclude --no-ignore-files --files -d|--max-depth="
        " --maxdepth= --max-filesize= --color= --colors= --no-heading --heading --column"
        " --no-column --vimgrep --json --stats -p|--pretty -0|--null -U|--multiline"
        " --multiline-dotall -P|--pcre2 --engine= -a|--text --binary --sort= --sortr="
        " -M|--max-columns= --max-columns-preview --trim -b|--byte-offset -r|--replace="
        " --passthru --no-messages --no-config -j|--threads= --debug --one-file-system"
        " --crlf --null-data --line-buffered --block-buffered --path-separator="
        " --field-match-separator="
        " --field-context-separator= --include-zero --no-require-git -E|--encoding="
        " x:--pre= x:--pre-glob= x:-z|--search-zip x:-L|--follow x:--ignore-file="
    ),
    "echo": grammar("-n -e -E", permute=False),
    "pwd": grammar("-L|--logical -P|--physical"),
    "stat": grammar(
        "-L|--dereference -f|--file-system -c|--format= --printf= -t|--terse --cached="
    ),
    "file": grammar(
        "-b|--brief -i|--mime --mime-type --mime-encoding -L|--dereference -h|--no-dereference"
        " -z|--uncompress -Z|--uncompress-noreport -k|--keep-going -r|--raw -s|--special-files"
        " -N|--no-pad -0|--print0 -p|--preserve-date -e|--exclude= -E --extension --apple"
        " -l|--list -S|--no-sandbox -F|--separator= -P|--parameter="
        " x:-m|--magic-file= x:-f|--files-from= x:-C|--compile"
    ),
    "du": grammar(
        "-0|--null -a|--all --apparent-size -B|--block-size= -b|--bytes -c|--total"
        " -D|--dereference-args -d|--max-depth= -H -h|--human-readable --inodes -k -l|--count-links"
        " -m -P|--no-dereference -S|--separate-dirs --si -s|--summarize -t|--threshold="
        " --time=? --time-style= -x|--one-file-system --exclude= r:-X|--exclude-from="
        " x:--files0-from= x:-L|--dereference"
    ),
    "df": grammar(
        "-a|--all -B|--block-size= -h|--human-readable -H|--si -i|--inodes -k -l|--local"
        " --no-sync --sync --output=? -P|--portability --total -t|--type= -T|--print-type"
        " -x|--exclude-type="
    ),
    "diff": grammar(
        "--normal -q|--brief -s|--report-identical-files -c -C|--context=? -u -U|--unified=?"
        " -e|--ed -n|--rcs -y|--side-by-side -W|--width= --left-column --suppress-common-lines"
        " -p|--show-c-function -F|--show-function-line= --label= -t|--expand-tabs -T|--initial-tab"
        " --tabsize= --suppress-blank-empty -l|--paginate x:-r|--recursive --no-dereference"
        " -N|--new-file --unidirectional-new-file --ignore-file-name-case"
        " --no-ignore-file-name-case -x|--exclude= r:-X|--exclude-from= -S|--starting-file="
        " r:--from-file= r:--to-file= -i|--ignore-case -E|--ignore-tab-expansion"
        " -Z|--ignore-trailing-space -b|--ignore-space-change -w|--ignore-all-space"
        " -B|--ignore-blank-lines -I|--ignore-matching-lines= -a|--text --strip-trailing-cr"
        " -D|--ifdef= --GTYPE-group-format= --line-format= --LTYPE-line-format="
        " -d|--minimal --horizon-lines= --speed-large-files " + _COLOR + " --palette=",
        numeric=True,
    ),
    "cmp": grammar(
        "-b|--print-bytes -i|--ignore-initial= -l|--verbose -n|--bytes= -s|--quiet|--silent"
    ),
    "sort": grammar(
        "-b|--ignore-leading-blanks -d|--dictionary-order -f|--ignore-case"
        " -g|--general-numeric-sort"
        " -i|--ignore-nonprinting -M|--month-sort -h|--human-numeric-sort -n|--numeric-sort"
        " -R|--random-sort r:--random-source= -r|--reverse --sort= -V|--version-sort"
        " --batch-size= -c|--check=? -C -k|--key= -m|--merge -s|--stable -S|--buffer-size="
        " -t|--field-separator= -u|--unique -z|--zero-terminated --parallel= --debug"
        " x:--files0-from= w:-o|--output= x:-T|--temporary-directory= x:--compress-program="
    ),
    "uniq": grammar(
        "-c|--count -d|--repeated -D --all-repeated=? -f|--skip-fields= --group=?"
        " -i|--ignore-case -s|--skip-chars= -u|--unique -z|--zero-terminated -w|--check-chars="
    ),
    "cut": grammar(
        "-b|--bytes= -c|--characters= -d|--delimiter= -f|--fields= -n --complement"
        " -s|--only-delimited --output-delimiter= -z|--zero-terminated"
    ),
    "tr": grammar("-c|-C|--complement -d|--delete -s|--squeeze-repeats -t|--truncate-set1"),
    "nl": grammar(
        "-b|--body-numbering= -d|--section-delimiter= -f|--footer-numbering="
        " -h|--header-numbering= -i|--line-increment= -l|--join-blank-lines= -n|--number-format="
        " -p|--no-renumber -s|--number-separator= -v|--starting-line-number= -w|--number-width="
    ),
    "od": grammar(
        "-A|--address-radix= --endian= -j|--skip-bytes= -N|--read-bytes= -S|--strings=?"
        " -t|--format= -v|--output-duplicates -w|--width=? --traditional -a -b -c -d -f -i -l -o"
        " -s -x"
    ),
    "hexdump": grammar("-b -c -C -d -o -x -e= r:-f= -n= -s= -v -L=?"),
    "xxd": grammar(
        "-a|-autoskip -b|-bits -C|-capitalize -c|-cols= -E|-EBCDIC -e -g|-groupsize="
        " -i|-include -l|-len= -n|-name= -o|-offset= -p|-ps|-postscript|-plain -r|-revert"
        " -d -s|-seek= -u -R="
    ),
    "sum": grammar(
        "-b|--binary x:-c|--check -t|--text --tag --untagged -z|--zero --ignore-missing --quiet"
        " --status --strict -w|--warn -l|--length= -a|--algorithm= --base64 --raw"
    ),
    "basename": grammar("-a|--multiple -s|--suffix= -z|--zero"),
    "dirname": grammar("-z|--zero"),
    "realpath": grammar(
        "-e|--canonicalize-existing -m|--canonicalize-missing -L|--logical -P|--physical"
        " -q|--quiet --relative-to= --relative-base= -s|--strip|--no-symlinks -z|--zero"
    ),
    "readlink": grammar(
        "-f|--canonicalize -e|--canonicalize-existing -m|--canonicalize-missing"
        " -n|--no-newline -q|--quiet -s|--silent -v|--verbose -z|--zero"
    ),
    "tree": grammar(
        "-a -d -f -i -q -N -Q -p -u -g -s -h --si --du -D --timefmt= -F -C -n -A -S -v -t -c -U -r"
        " --dirsfirst --filesfirst -L= -P= -I= --gitignore --matchdirs --ignore-case --noreport"
        " --prune --charset= --filelimit= --sort= -J -X --inodes --device -x"
        " x:-l x:-o= x:-R x:-H= x:--fromfile"
    ),
    "column": grammar(
        "-c|--output-width= -d|--table-noheadings -e|--table-header-repeat -H|--table-hide="
        " -J|--json -L|--keep-empty-lines -l|--table-columns-limit= -N|--table-columns="
        " -n|--table-name= -O|--table-order= -o|--output-separator= -R|--table-right="
        " -r|--tree= -i|--tree-id= -p|--tree-parent= -s|--separator= -t|--table"
        " -T|--table-truncate= -W|--table-wrap= -x|--fillrows"
    ),
    "comm": grammar(
        "-1 -2 -3 --check-order --nocheck-order --output-delimiter= --total -z|--zero-terminated"
    ),
    "join": grammar(
        "-a= -e= -i|--ignore-case -j= -o= -t= -v= -1= -2= --check-order --nocheck-order"
        " --header -z|--zero-terminated"
    ),
    "paste": grammar("-d|--delimiters= -s|--serial -z|--zero-terminated"),
    "fold": grammar("-b|--bytes -s|--spaces -w|--width="),
    "rev": grammar("-0|--zero"),
    "tac": grammar("-b|--before -r|--regex -s|--separator="),
    "seq": grammar("-f|--format= -s|--separator= -w|--equal-width", permute=False),
    "sleep": grammar(""),
    "true": grammar("", permute=False),
    "date": grammar(
        "-d|--date= --debug r:-f|--file= -I|--iso-8601=? --resolution -R|--rfc-email"
        " --rfc-3339= r:-r|--reference= -u|--utc|--universal x:-s|--set="
    ),
    "uname": grammar(
        "-a|--all -s|--kernel-name -n|--nodename -r|--kernel-release -v|--kernel-version"
        " -m|--machine -p|--processor -i|--hardware-platform -o|--operating-system"
    ),
    "whoami": grammar(""),
    "id": grammar("-a -Z|--context -g|--group -G|--groups -n|--name -r|--real -u|--user -z|--zero"),
    "hostname": grammar(
        "-a|--alias -A|--all-fqdns -d|--domain -f|--fqdn|--long -i|--ip-address"
        " -I|--all-ip-addresses -s|--short -y|--yp|--nis"
    ),
    "nproc": grammar("--all --ignore="),
    "which": grammar("-a -s"),
    "jq": grammar(
        "-n|--null-input -R|--raw-input -s|--slurp -c|--compact-output -r|--raw-output"
        " -j|--join-output -a|--ascii-output -S|--sort-keys -C|--color-output"
        " -M|--monochrome-output --tab --indent= --unbuffered --stream --stream-errors --seq"
        " -e|--exit-status x:--arg= x:--argjson= --args --jsonargs -0|--nul-output --raw-output0"
        " x:-f|--from-file= x:-L= x:--slurpfile= x:--rawfile="
    ),
    "sed": grammar(
        "-n|--quiet|--silent --debug -e|--expression= -E|-r|--regexp-extended -s|--separate"
        " --posix -u|--unbuffered -z|--null-data -l|--line-length= --sandbox"
        " -b|--binary --follow-symlinks x:-f|--file= w:-i|--in-place=?"
    ),
    "awk": grammar(
        "-F|--field-separator= -v|--assign= -e|--source= -b|--characters-as-bytes"
        " -c|--traditional -P|--posix -s|--no-optimize -O|--optimize -S|--sandbox"
        " -N|--use-lc-numeric -n|--non-decimal-data -t|--lint-old"
        " x:-f|--file= x:-i|--include= x:-l|--load= x:-E|--exec= x:-d|--dump-variables=?"
        " x:-D|--debug=? x:-p|--profile=? x:-o|--pretty-print=? x:-L|--lint=? x:-M|--bignum",
        permute=False,
    ),
    "cd": grammar("-L -P -e -@", permute=False),
    "mkdir": grammar("-p|--parents -v|--verbose -m|--mode= -Z --context=?"),
    "touch": grammar(
        "-a -c|--no-create -d|--date= -f -h|--no-dereference -m r:-r|--reference= -t= --time="
    ),
    "tee": grammar("-a|--append -i|--ignore-interrupts -p --output-error=?"),
    "cp": grammar(
        "-i|--interactive -n|--no-clobber -f|--force -p --preserve=? --no-preserve= -v|--verbose"
        " -u|--update=? --attributes-only --debug -T|--no-target-directory -b --backup=?"
        " -S|--suffix= --strip-trailing-slashes --sparse= --reflink=?"
        " x:-r|-R|--recursive x:-a|--archive x:-d x:-l|--link x:-s|--symbolic-link"
        " x:-L|--dereference x:-P|--no-dereference x:-H x:-x|--one-file-system x:--parents"
        " x:-t|--target-directory= x:--remove-destination x:--copy-contents"
        " x:--keep-directory-symlink"
    ),
    "mv": grammar(
        "-i|--interactive -n|--no-clobber -f|--force -v|--verbose -u|--update=? -b --backup=?"
        " -S|--suffix= -T|--no-target-directory --strip-trailing-slashes --debug"
        " --no-copy --exchange x:-t|--target-directory="
    ),
}
_G["egrep"] = _G["fgrep"] = _G["grep"]
for _alg in (
    "md5sum",
    "sha1sum",
    "sha224sum",
    "sha256sum",
    "sha384sum",
    "sha512sum",
    "b2sum",
    "cksum",
):
    _G[_alg] = _G["sum"]
_G["false"] = _G["true"]
_G["gawk"] = _G["mawk"] = _G["nawk"] = _G["awk"]

# -- git ---------------------------------------------------------------------------------

_GIT_GLOBAL = grammar(
    "c:-C= -p|--paginate -P|--no-pager --no-replace-objects --literal-pathspecs"
    " --glob-pathspecs --noglob-pathspecs --icase-pathspecs --no-optional-locks"
    " --no-advice --version"
    " x:-c= x:--config-env= x:--exec-path=? x:--git-dir= x:--work-tree= x:--namespace= x:--bare"
    " x:--super-prefix= x:--html-path x:--man-path x:--info-path x:--list-cmds= x:--help",
    permute=False,
)
_DIFF_OPTS = (
    "-p|-u|--patch -s|--no-patch -U|--unified= --output-indicator-new= --output-indicator-old="
    " --output-indicator-context= --raw --patch-with-raw -t --indent-heuristic"
    " --no-indent-heuristic --minimal --patience --histogram --anchored= --diff-algorithm="
    " --stat=? --compact-summary --numstat --shortstat -X|--dirstat=? --cumulative"
    " --dirstat-by-file=? --summary --patch-with-stat -z --name-only --name-status --submodule=?"
    " " + _COLOR + " --no-color --color-moved=? --no-color-moved --color-moved-ws="
    " --no-color-moved-ws --word-diff=? --word-diff-regex= --color-words=? --no-renames"
    " --rename-empty --no-rename-empty --check --ws-error-highlight= --full-index --binary"
    " --abbrev=? -B|--break-rewrites=? -M|--find-renames=? -C|--find-copies=?"
    " --find-copies-harder -D|--irreversible-delete -l= --diff-filter= -S= -G= --find-object="
    " --pickaxe-all --pickaxe-regex -R --relative=? --no-relative -a|--text"
    " --ignore-cr-at-eol --ignore-space-at-eol -b|--ignore-space-change -w|--ignore-all-space"
    " --ignore-blank-lines -I|--ignore-matching-lines= --inter-hunk-context= -W|--function-context"
    " --exit-code --quiet --no-ext-diff --textconv --no-textconv --ignore-submodules=?"
    " --src-prefix= --dst-prefix= --no-prefix --default-prefix --line-prefix="
    " --ita-invisible-in-index --ita-visible-in-index --cached --staged --merge-base"
    " -1|--base -2|--ours -3|--theirs -0 --no-index"
    " x:--output= x:--ext-diff r:-O="
)
_LOG_OPTS = (
    " --follow --no-decorate --decorate=? --decorate-refs= --decorate-refs-exclude="
    " --source --clear-decorations --use-mailmap --mailmap --no-use-mailmap --no-mailmap"
    " --full-diff --log-size -L= -n|--max-count= --skip= --since= --after= --since-as-filter="
    " --until= --before= --author= --committer= --grep-reflog= --grep= --all-match"
    " --invert-grep -i|--regexp-ignore-case --basic-regexp -E|--extended-regexp"
    " -F|--fixed-strings -P|--perl-regexp --remove-empty --merges --no-merges --min-parents="
    " --max-parents= --no-min-parents --no-max-parents --first-parent --exclude-first-parent-only"
    " --not --all --branches=? --tags=? --remotes=? --glob= --exclude= --reflog --alternate-refs"
    " --single-worktree --ignore-missing --bisect --stdin --cherry-mark --cherry-pick"
    " --left-only --right-only --cherry -g|--walk-reflogs --merge --boundary"
    " --simplify-by-decoration"
    " --show-pulls --full-history --dense --sparse --simplify-merges --ancestry-path=?"
    " --date-order --author-date-order --topo-order --reverse --no-walk=? --do-walk"
    " --pretty=? --format= --abbrev-commit --no-abbrev-commit --oneline --encoding="
    " --expand-tabs=? --no-expand-tabs --notes=? --no-notes --show-notes=? --standard-notes"
    " --no-standard-notes x:--show-signature --relative-date --date= --parents --children"
    " --left-right --graph --show-linear-break=? -c --cc --dd -m --diff-merges= --no-diff-merges"
    " --combined-all-paths -r -t --count --objects --objects-edge --unpacked --timestamp"
    " --no-walk --in-commit-order --stat-width= --stat-name-width= --stat-count= --max-age="
    " --min-age="
)
_GIT_GREP = grammar(
    "--cached --untracked --no-index --no-exclude-standard --exclude-standard --recurse-submodules"
    " -a|--text --textconv --no-textconv -i|--ignore-case -I --max-depth= -r|--recursive"
    " --no-recursive -w|--word-regexp -v|--invert-match -h -H --full-name -E|--extended-regexp"
    " -G|--basic-regexp -P|--perl-regexp -F|--fixed-strings -n|--line-number --column"
    " -l|--files-with-matches --name-only -L|--files-without-match -z|--null -o|--only-matching"
    " -c|--count " + _COLOR + " --no-color --break --heading -p|--show-function"
    " -A|--after-context= -B|--before-context= -C|--context= -W|--function-context"
    " -m|--max-count= --threads= -e= --and --or --not --all-match -q|--quiet r:-f="
    " x:-O|--open-files-in-pager=?",
    numeric=True,
)
_GIT: dict[str, Grammar] = {
    "status": grammar(
        "-s|--short -b|--branch --show-stash --porcelain=? --long -v|--verbose"
        " -u|--untracked-files=? --ignore-submodules=? --ignored=? -z --column=? --no-column"
        " --ahead-behind --no-ahead-behind --renames --no-renames --find-renames=?"
    ),
    "diff": grammar(_DIFF_OPTS),
    "log": grammar(_DIFF_OPTS + _LOG_OPTS, numeric=True),
    "show": grammar(_DIFF_OPTS + _LOG_OPTS, numeric=True),
    "shortlog": grammar(
        "-n|--numbered -s|--summary -e|--email --format=? --date= --group= -c|--committer"
        " -w=? " + _LOG_OPTS
    ),
    "whatchanged": grammar(_DIFF_OPTS + _LOG_OPTS, numeric=True),
    "rev-list": grammar(_LOG_OPTS + " --quiet --disk-usage=? --header --abbrev=?", numeric=True),
    "branch": grammar(
        "-a|--all -r|--remotes -v|-vv|--verbose -l|--list --show-current --contains=?"
        " --no-contains=? --merged=? --no-merged=? --sort= --format= " + _COLOR + " --no-color"
        " --column=? --no-column --points-at= -i|--ignore-case --abbrev=? --no-abbrev -q|--quiet"
    ),
    "tag": grammar(
        "-l|--list -n= --sort= --format= --contains=? --no-contains=? --points-at=? --merged=?"
        " --no-merged=? -i|--ignore-case --column=? --no-column " + _COLOR
    ),
    "rev-parse": grammar(
        "--show-toplevel --git-dir --git-common-dir --absolute-git-dir --abbrev-ref=? --short=?"
        " --verify -q|--quiet --is-inside-work-tree --is-inside-git-dir --is-bare-repository"
        " --is-shallow-repository --show-prefix --show-cdup --symbolic --symbolic-full-name --sq"
        " --all --branches=? --tags=? --remotes=? --glob= --default= --revs-only --no-revs"
        " --flags --no-flags --path-format= --show-superproject-working-tree"
        " --show-object-format=? --show-ref-format --local-env-vars --since= --until= --not"
        " --git-path= --resolve-git-dir= --shared-index-path"
    ),
    "ls-files": grammar(
        "-c|--cached -d|--deleted -m|--modified -o|--others -i|--ignored -s|--stage"
        " -u|--unmerged -k|--killed -z -t -v -f --directory --no-empty-directory --eol"
        " --full-name --recurse-submodules --error-unmatch --exclude-standard --deduplicate"
        " --sparse -x|--exclude= r:-X|--exclude-from= --exclude-per-directory= --abbrev=?"
        " --format= --debug --resolve-undo --with-tree="
    ),
    "ls-tree": grammar(
        "-d -r -t -l|--long -z --name-only --name-status --object-only --full-name --full-tree"
        " --abbrev=? --format="
    ),
    "blame": grammar(
        "-b --root --show-stats -L= -l -t r:-S= --reverse= --first-parent -p|--porcelain"
        " --line-porcelain --incremental --encoding= r:--contents= --date= --progress"
        " --no-progress -M=? -C=? --ignore-rev= r:--ignore-revs-file= --color-lines"
        " --color-by-age --minimal -s -e|--show-email -w -f|--show-name -n|--show-number -c"
        " --abbrev=? --score-debug"
    ),
    "describe": grammar(
        "--all --tags --contains --abbrev= --candidates= --exact-match --debug --long --match="
        " --exclude= --always --first-parent x:--dirty=? x:--broken=?"
    ),
    "cat-file": grammar("-t -s -e -p --allow-unknown-type --mailmap --no-mailmap"),
    "show-ref": grammar(
        "--head --branches --tags -d|--dereference -s|--hash=? --abbrev=? --verify --exists"
        " -q|--quiet"
    ),
    "for-each-ref": grammar(
        "--count= --sort= --format= --points-at= --merged=? --no-merged=? --contains=?"
        " --no-contains=? --ignore-case --omit-empty --exclude= -s|--shell -p|--perl --python --tcl"
    ),
    "merge-base": grammar("-a|--all --octopus --independent --is-ancestor --fork-point"),
    "name-rev": grammar(
        "--tags --refs= --exclude= --all --annotate-stdin --name-only --no-undefined --always"
    ),
    "count-objects": grammar("-v|--verbose -H|--human-readable"),
    "grep": _GIT_GREP,
}
_GIT_CONFIG_READ = grammar(
    "--get --get-all --get-regexp --get-urlmatch -l|--list --show-origin --show-scope"
    " --name-only -z|--null --local --worktree r:-f|--file= r:--blob="
    " --type= --bool --int --bool-or-int --path --expiry-date --default= --no-includes"
    " --fixed-value --all --regexp= --value= --url= x:--global x:--system x:--includes"
)

# -- the safe set --------------------------------------------------------------------------

SHELLS = frozenset(
    {"sh", "bash", "dash", "ash", "rbash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh"}
)
_BASH_LIKE = frozenset({"sh", "bash", "dash", "ash", "rbash"})
_VERSION_QUERY = frozenset(
    {
        "python",
        "python3",
        "node",
        "npm",
        "npx",
        "pnpm",
        "yarn",
        "deno",
        "bun",
        "go",
        "rustc",
        "cargo",
        "java",
        "javac",
        "gcc",
        "g++",
        "cc",
        "clang",
        "make",
        "cmake",
        "uv",
        "pip",
        "pip3",
        "ruby",
        "perl",
        "php",
        "git",
        "docker",
        "kubectl",
        "terraform",
        "pytest",
        "ruff",
        "mypy",
        "tsc",
        "bash",
        "sh",
        "zsh",
        "jq",
        "rg",
        "grep",
        "sed",
        "awk",
        "ls",
        "cat",
        "find",
    }
)

_READ_OPERANDS = frozenset(
    {
        "ls",
        "cat",
        "wc",
        "stat",
        "file",
        "du",
        "cmp",
        "tac",
        "nl",
        "od",
        "hexdump",
        "rev",
        "fold",
        "paste",
        "comm",
        "join",
        "column",
        "md5sum",
        "sha1sum",
        "sha224sum",
        "sha256sum",
        "sha384sum",
        "sha512sum",
        "b2sum",
        "cksum",
        "realpath",
        "readlink",
        "tree",
        "head",
        "tail",
        "cut",
        "sort",
        "df",
        "diff",
    }
)
_TEXT_OPERANDS = frozenset(
    {
        "echo",
        "basename",
        "dirname",
        "seq",
        "sleep",
        "true",
        "false",
        "which",
        "uname",
        "whoami",
        "id",
        "nproc",
    }
)
_NO_OPERANDS = frozenset({"pwd", "hostname"})
_BUILTIN_TEXT = frozenset({":", "test", "[", "type"})


def model_args(name: str, args: tuple[str | None, ...]) -> ParsedArgs | None:
    """Parse ``args`` with ``name``'s grammar, for rule normalisation (None: no grammar)."""
    found = _G.get(name) or _SIMPLE_WRAPPERS.get(name) or _RULE_GRAMMARS.get(name)
    if found is None:
        return None
    parsed = parse_args(found, args)
    return None if parsed.error else parsed


_RM = grammar(
    "-f|--force -i -I --interactive=? --one-file-system --no-preserve-root --preserve-root=?"
    " -r|-R|--recursive -d|--dir -v|--verbose"
)
_CHMOD = grammar(
    "-c|--changes -f|--silent|--quiet -v|--verbose --no-preserve-root --preserve-root"
    " --reference= -R|--recursive -h|--no-dereference --dereference -H -L -P --from="
)


_RULE_GRAMMARS: dict[str, Grammar] = {}


def _options_use(
    name: str, parsed: ParsedArgs
) -> tuple[Use | None, list[str], list[str], str | None]:
    reads: list[str] = []
    writes: list[str] = []
    cwd: str | None = None
    for opt, value, spelling in parsed.options:
        if opt.role == "unsafe":
            return _ask(name, f"{name} {spelling}: {opt.why}"), reads, writes, cwd
        if opt.role == "read" and value is not None:
            reads.append(value)
        elif opt.role == "write" and value is not None:
            writes.append(value)
        elif opt.role == "cwd" and value is not None:
            cwd = value
    return None, reads, writes, cwd


def _static(operands: tuple[str | None, ...]) -> list[str] | None:
    if any(o is None for o in operands):
        return None
    return [o for o in operands if o is not None]


def _generic(name: str, args: Argv) -> Use:
    """A program of the safe set with a plain grammar and operand roles."""
    parsed = parse_args(_G[name], args)
    if parsed.error:
        return _ask(name, f"{name}: {parsed.error}")
    refused, reads, writes, _ = _options_use(name, parsed)
    if refused is not None:
        return refused
    operands = _static(parsed.operands)
    if operands is None:
        return _ask(name, f"{name}: an operand is computed at run time")
    writer = bool(writes)
    if name in _READ_OPERANDS:
        reads += [o for o in operands if o != "-"]
        if name in ("diff", "cmp"):
            # a directory operand makes diff read (and follow links in) every file in it
            return Use(verdict="allow", reason=f"{name} is in the safe set", rule=f"model:{name}",
                       reads=tuple(reads), files_only=tuple(reads))  # fmt: skip
    elif name in _NO_OPERANDS and operands:
        return _ask(name, f"{name} with operands changes something")
    elif name == "date" and any(not o.startswith("+") for o in operands):
        return _ask(name, "date with an operand that is not +FORMAT sets the clock")
    elif name in ("grep", "egrep", "fgrep"):
        if not parsed.has("--regexp", "--file"):
            operands = operands[1:]
        reads += [o for o in operands if o != "-"]
    elif name == "rg":
        if not parsed.has("--regexp", "--file", "--files", "--type-list"):
            operands = operands[1:]
        reads += operands
    elif name in ("uniq", "xxd"):
        if len(operands) > 2:
            return _ask(name, f"{name} takes at most an input and an output")
        reads += [o for o in operands[:1] if o != "-"]
        if len(operands) == 2:
            writes.append(operands[1])
            writer = True
    elif name == "tr":
        pass
    elif name == "jq":
        if parsed.has("--args", "--jsonargs"):
            return _ask(name, "jq --args/--jsonargs: which words are files depends on their order")
        if not operands:
            return _ask(name, "jq without a filter")
        if _JQ_DANGER.search(operands[0]):
            return _ask(name, f"jq filter {operands[0]!r} reads the environment or loads modules")
        reads += operands[1:]
    elif name in ("mkdir", "touch", "tee"):
        writes += operands
        writer = True
    elif name in ("cp", "mv"):
        if len(operands) < 2:
            return _ask(name, f"{name} needs a source and a destination")
        sources, dest = operands[:-1], operands[-1]
        (writes if name == "mv" else reads).extend(sources)
        writes.append(dest)
        writer = True
        return Use(
            verdict="allow",
            reason=f"{name} of files inside the roots",
            rule=f"model:{name}",
            reads=tuple(reads),
            writes=tuple(writes),
            writer=True,
            files_only=tuple(sources),
        )
    elif name not in _TEXT_OPERANDS:
        reads += operands
    return Use(
        verdict="allow",
        reason=f"{name} is in the safe set",
        rule=f"model:{name}",
        reads=tuple(reads),
        writes=tuple(writes),
        writer=writer,
    )


_SED_SIMPLE = re.compile(r"[0-9$,~!+ \t]*")


def _sed_script_safe(script: str) -> str | None:
    """None when a sed script only prints, deletes and substitutes, else why not."""
    i = 0
    n = len(script)
    while i < n:
        ch = script[i]
        if ch in " \t\n;{}!,$0123456789~+":
            i += 1
            continue
        if ch in "/\\":
            delim = "/" if ch == "/" else (script[i + 1] if i + 1 < n else "")
            i += 1 if ch == "/" else 2
            while i < n and script[i] != delim:
                i += 2 if script[i] == "\\" else 1
            i += 1
            while i < n and script[i] in "IM":
                i += 1
            continue
        if ch in "pdDnNgGhHxlq=QzP":
            i += 1
            continue
        if ch in "sy":
            if i + 1 >= n:
                return f"an incomplete {ch!r} command"
            delim = script[i + 1]
            if delim in "\\\n":
                return f"an unusual {ch!r} delimiter"
            i += 2
            for _ in range(2):
                while i < n and script[i] != delim:
                    i += 2 if script[i] == "\\" else 1
                i += 1
            if ch == "s":
                start = i
                while i < n and script[i] not in ";\n}":
                    i += 1
                flags = script[start:i].strip()
                if any(f not in "gpiImM0123456789" for f in flags):
                    return f"the s flag(s) {flags!r} can run commands or write files"
            continue
        if ch in "bt:T":
            while i < n and script[i] not in ";\n":
                i += 1
            continue
        if ch in "aic":
            return "a/i/c text commands are not modelled"
        return f"the sed command {ch!r} can run commands, read or write files"
    return None


def _sed(args: Argv) -> Use:
    parsed = parse_args(_G["sed"], args)
    if parsed.error:
        return _ask("sed", f"sed: {parsed.error}")
    refused, _, _, _ = _options_use("sed", parsed)
    if refused is not None:
        return refused
    operands = _static(parsed.operands)
    if operands is None:
        return _ask("sed", "sed: an operand is computed at run time")
    scripts = [v for v in parsed.values("--expression") if v is not None]
    if not scripts:
        if not operands:
            return _ask("sed", "sed without a script")
        scripts, operands = [operands[0]], operands[1:]
    for script in scripts:
        why = _sed_script_safe(script)
        if why is not None:
            return _ask("sed", f"sed script {script!r}: {why}")
    in_place = parsed.has("--in-place")
    files = [o for o in operands if o != "-"]
    if in_place:
        return Use(
            verdict="allow",
            reason="sed -i edits files inside the roots",
            rule="model:sed",
            reads=tuple(files),
            writes=tuple(files),
            writer=True,
        )
    return _allow("sed", reads=tuple(files))


_JQ_DANGER = re.compile(
    r"\benv\b|\$\s*ENV|\$\s*__prog|\bimport\b|\binclude\b|\bmodulemeta\b|\bget_search_list\b"
)
_AWK_DANGER = re.compile(r"system|getline|[|>]|@|close|fflush|ENVIRON|PROCINFO|ARGV|ARGC|\bsubsep")


def _awk(name: str, args: Argv) -> Use:
    parsed = parse_args(_G["awk"], args)
    if parsed.error:
        return _ask(name, f"{name}: {parsed.error}")
    refused, _, _, _ = _options_use(name, parsed)
    if refused is not None:
        return refused
    operands = _static(parsed.operands)
    if operands is None:
        return _ask(name, f"{name}: an operand is computed at run time")
    programs = [v for v in parsed.values("--source") if v is not None]
    if not programs:
        if not operands:
            return _ask(name, f"{name} without a program")
        programs, operands = [operands[0]], operands[1:]
    for program in programs:
        if _AWK_DANGER.search(program):
            return _ask(
                name,
                f"{name} program {program!r} may run commands, read the environment or write files",
            )
    files = [o for o in operands if o != "-" and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", o)]
    return _allow(name, reads=tuple(files))


_FIND_TESTS_WITH_VALUE = frozenset(
    {
        "-name",
        "-iname",
        "-path",
        "-ipath",
        "-wholename",
        "-iwholename",
        "-regex",
        "-iregex",
        "-lname",
        "-ilname",
        "-type",
        "-xtype",
        "-size",
        "-mtime",
        "-mmin",
        "-atime",
        "-amin",
        "-ctime",
        "-cmin",
        "-perm",
        "-user",
        "-group",
        "-uid",
        "-gid",
        "-links",
        "-maxdepth",
        "-mindepth",
        "-inum",
        "-regextype",
        "-printf",
        "-used",
        "-fstype",
        "-context",
        "-newer",
        "-anewer",
        "-cnewer",
        "-samefile",
        "-newermt",
        "-newerct",
        "-neweraa",
        "-newermm",
    }
)
_FIND_FLAGS = frozenset(
    {
        "-print",
        "-print0",
        "-ls",
        "-true",
        "-false",
        "-not",
        "!",
        "-a",
        "-and",
        "-o",
        "-or",
        "(",
        ")",
        ",",
        "-empty",
        "-readable",
        "-writable",
        "-executable",
        "-prune",
        "-quit",
        "-depth",
        "-d",
        "-nouser",
        "-nogroup",
        "-mount",
        "-xdev",
        "-noleaf",
        "-daystart",
        "-nowarn",
        "-warn",
        "-ignore_readdir_race",
        "-noignore_readdir_race",
    }
)
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_FIND_READ_VALUES = frozenset({"-newer", "-anewer", "-cnewer", "-samefile"})


def _find(args: Argv) -> Use:
    index = 0
    while index < len(args) and args[index] in ("-H", "-P", "-O0", "-O1", "-O2", "-O3"):
        index += 1
    if index < len(args) and args[index] in ("-L", "-follow"):
        return _ask("find", "find -L follows symlinks out of the roots")
    paths: list[str] = []
    while index < len(args):
        arg = args[index]
        if arg is None:
            return _ask("find", "find: an argument is computed at run time")
        if arg.startswith("-") or arg in ("(", "!", ")", ","):
            break
        paths.append(arg)
        index += 1
    reads = list(paths) or ["."]
    inner: list[Inner] = []
    refused: str | None = None
    while index < len(args):
        arg = args[index]
        if arg is None:
            return _ask("find", "find: an argument is computed at run time", inner=tuple(inner))
        if arg in _FIND_EXEC:
            end = index + 1
            while end < len(args) and args[end] not in (";", "+"):
                end += 1
            command = tuple(None if (a is None or "{}" in a) else a for a in args[index + 1 : end])
            if command:
                inner.append(Inner(argv=command, transparent=False))
            refused = refused or f"find {arg} runs a command for every file"
            index = end + 1
            continue
        if arg in _FIND_TESTS_WITH_VALUE:
            if index + 1 >= len(args) or args[index + 1] is None:
                return _ask("find", f"find {arg} without a fixed value")
            if arg in _FIND_READ_VALUES:
                reads.append(str(args[index + 1]))
            index += 2
            continue
        if arg in _FIND_FLAGS or arg.startswith("-newer"):
            index += 1 if arg in _FIND_FLAGS else 2
            continue
        if arg in ("-delete", "-fprint", "-fprint0", "-fprintf", "-fls"):
            refused = refused or f"find {arg} deletes or writes files"
            index += 1
            continue
        refused = refused or f"find: {arg!r} is not a modelled expression"
        index += 1
    if refused is not None:
        return _ask("find", refused, inner=tuple(inner))
    return _allow("find", reads=tuple(reads))


def _git(args: Argv) -> Use:
    parsed = parse_args(_GIT_GLOBAL, args)
    if parsed.error:
        return _ask("git", f"git: {parsed.error}")
    refused, reads, _, cwd = _options_use("git", parsed)
    if refused is not None:
        return refused
    operands = parsed.operands
    if not operands:
        if parsed.has("--version"):
            return _allow("git", "git --version")
        return _ask("git", "git without a subcommand")
    sub, rest = operands[0], operands[1:]
    if sub is None:
        return _ask("git", "git: the subcommand is computed at run time")
    rule = f"model:git {sub}"
    if cwd is not None:
        reads.append(cwd)
    if sub == "config":
        sub_parsed = parse_args(_GIT_CONFIG_READ, rest)
        words = _static(sub_parsed.operands) if not sub_parsed.error else None
        reading = sub_parsed.has("--get", "--get-all", "--get-regexp", "--list", "--get-urlmatch")
        if words and words[0] in ("get", "list"):
            reading = True
        if not sub_parsed.error:
            refused, config_reads, _, _ = _options_use("git config", sub_parsed)
            if refused is not None:
                return attrs.evolve(refused, rule=rule)
            if cwd is not None and config_reads:
                return Use(verdict="ask", reason="git -C with file arguments", rule=rule)
            reads += config_reads
        scoped = sub_parsed.has("--local", "--worktree", "--file", "--blob")
        if not sub_parsed.error and reading and not scoped:
            # without a scope git also reads the user's and the system's config (tokens live
            # there) and follows their includes
            return Use(verdict="ask", reason="git config without --local reads config outside "
                       "the roots", rule=rule)  # fmt: skip
        if sub_parsed.error or words is None or not reading:
            return Use(
                verdict="ask",
                reason="git config that is not a plain read changes "
                "configuration that can run programs",
                rule=rule,
                writer=True,
            )
        return Use(
            verdict="allow", reason="git config read", rule=rule, reads=tuple(reads), cwd=cwd
        )
    if sub == "stash":
        if not rest or rest[0] not in ("list", "show"):
            return Use(
                verdict="ask", reason="git stash changes the work tree", rule=rule, writer=True
            )
        sub_parsed = parse_args(_GIT["log"], rest[1:])
    elif sub == "remote":
        words = _static(rest)
        if words in ([], ["-v"], ["--verbose"]) or (
            words is not None and len(words) == 2 and words[0] == "get-url"
        ):
            return Use(
                verdict="allow", reason="git remote listing", rule=rule, cwd=cwd, reads=tuple(reads)
            )
        return Use(
            verdict="ask", reason="git remote with arguments changes or contacts remotes", rule=rule
        )
    elif sub == "reflog":
        if rest and rest[0] not in ("show",) and not str(rest[0]).startswith("-"):
            return Use(
                verdict="ask", reason="git reflog that is not a listing", rule=rule, writer=True
            )
        sub_parsed = parse_args(_GIT["log"], rest[1:] if rest and rest[0] == "show" else rest)
    elif sub in _GIT:
        sub_parsed = parse_args(_GIT[sub], rest)
    else:
        return Use(
            verdict="ask", reason=f"git {sub} is not in the safe set", rule=rule, writer=True
        )
    if sub_parsed.error:
        return Use(verdict="ask", reason=f"git {sub}: {sub_parsed.error}", rule=rule)
    refused, sub_reads, sub_writes, _ = _options_use(f"git {sub}", sub_parsed)
    if refused is not None:
        return attrs.evolve(refused, rule=rule)
    sub_operands = _static(sub_parsed.operands)
    if sub_operands is None:
        return Use(
            verdict="ask", reason=f"git {sub}: an operand is computed at run time", rule=rule
        )
    if sub in ("branch", "tag") and sub_operands and not sub_parsed.has("--list"):
        return Use(
            verdict="ask",
            reason=f"git {sub} with a name creates or changes refs",
            rule=rule,
            writer=True,
        )
    for opt, value, _ in sub_parsed.options:
        if opt.canonical in ("--format", "--pretty") and value is not None and "%G" in value:
            return Use(verdict="ask", reason="a %G format checks signatures with gpg", rule=rule)
    if sub_parsed.has("--no-index"):
        sub_reads += sub_operands
    if cwd is not None and (sub_reads or len(reads) > 1):
        # paths given to git -C DIR are relative to DIR, not to where the line runs
        return Use(verdict="ask", reason="git -C with file arguments", rule=rule)
    return Use(
        verdict="allow",
        reason=f"git {sub} only reads the repository",
        rule=rule,
        reads=tuple(reads + sub_reads),
        writes=tuple(sub_writes),
        cwd=cwd,
    )


# -- wrappers --------------------------------------------------------------------------------

_ENV = grammar(
    "-i|--ignore-environment -0|--null -u|--unset= c:-C|--chdir= -S|--split-string="
    " -v|--debug --block-signal=? --default-signal=? --ignore-signal=? --list-signal-handling"
    " -a|--argv0=",
    permute=False,
)
_SIMPLE_WRAPPERS: dict[str, Grammar] = {
    "nice": grammar("-n|--adjustment=", permute=False),
    "nohup": grammar("", permute=False),
    "setsid": grammar("-c|--ctty -f|--fork -w|--wait", permute=False),
    "stdbuf": grammar("-i|--input= -o|--output= -e|--error=", permute=False),
    "command": grammar("-p -v -V", permute=False),
    "builtin": grammar("", permute=False),
    "exec": grammar("-a= -c -l", permute=False),
    "ionice": grammar(
        "-c|--class= -n|--classdata= -t|--ignore x:-p|--pid= x:-P|--pgid= x:-u|--uid=",
        permute=False,
    ),
    "timeout": grammar(
        "-s|--signal= -k|--kill-after= -p|--preserve-status -f|--foreground -v|--verbose",
        permute=False,
    ),
    "xargs": grammar(
        "-0|--null r:-a|--arg-file= -d|--delimiter= -E= -e|--eof=? -I= -i|--replace=?"
        " -L|--max-lines= -l=? -n|--max-args= -P|--max-procs= -p|--interactive"
        " --process-slot-var= -r|--no-run-if-empty -s|--max-chars= -t|--verbose -x|--exit"
        " --show-limits -o|--open-tty",
        permute=False,
    ),
    "flock": grammar(
        "-s|--shared -x|-e|--exclusive -u|--unlock -n|--nb|--nonblock -w|--timeout|--wait="
        " -E|--conflict-exit-code= -o|--close -F|--no-fork --verbose -c|--command=",
        permute=False,
    ),
    "script": grammar(
        "-a|--append -c|--command= -E|--echo= -e|--return -f|--flush --force -B|--log-io="
        " -I|--log-in= -O|--log-out= -T|--log-timing= -m|--logging-format= -o|--output-limit="
        " -q|--quiet -t|--timing=?",
        permute=False,
    ),
    "chroot": grammar("--userspec= --groups= --skip-chdir", permute=False),
    "sg": grammar("", permute=False),
    "watch": grammar(
        "-b|--beep -c|--color -C|--no-color -d|--differences=? -e|--errexit -g|--chgexit"
        " -n|--interval= -p|--precise -q|--equexit= -r|--no-rerun -t|--no-title -w|--no-wrap"
        " -x|--exec",
        permute=False,
    ),
    "time": grammar(
        "-a|--append -f|--format= -o|--output= -p|--portability -q|--quiet -v|--verbose",
        permute=False,
    ),
}
_TRANSPARENT = frozenset(
    {"nice", "nohup", "setsid", "stdbuf", "command", "builtin", "exec", "ionice", "timeout", "env"}
)
_OPAQUE_WRAPPERS = frozenset(
    {
        "sudo",
        "doas",
        "su",
        "pkexec",
        "run0",
        "strace",
        "ltrace",
        "unbuffer",
        "chrt",
        "taskset",
        "busybox",
        "unshare",
        "nsenter",
        "firejail",
        "bwrap",
        "proot",
        "fakeroot",
        "faketime",
        "caffeinate",
        "systemd-run",
        "numactl",
        "cgexec",
        "newgrp",
        "parallel",
        "ssh",
        "uv",
        "uvx",
        "npx",
        "pnpx",
        "bunx",
        "poetry",
        "pipenv",
        "pdm",
        "hatch",
        "conda",
        "mamba",
        "pixi",
        "docker",
        "podman",
        "kubectl",
        "nix-shell",
        "direnv",
        "sandbox-exec",
        "catchsegv",
        "valgrind",
        "gdb",
        "perf",
        "torsocks",
        "proxychains",
        "proxychains4",
        "tsocks",
        "schroot",
        "lxc-attach",
        "machinectl",
        "runuser",
        "setpriv",
        "capsh",
        "prlimit",
        "chpst",
        "daemonize",
        "start-stop-daemon",
        "at",
        "batch",
        "crontab",
        "screen",
        "tmux",
        "expect",
        "entr",
        "inotifywait",
        "git-shell",
        "dbus-launch",
        "xvfb-run",
        "with-contenv",
        "s6-setuidgid",
    }
)
_RULE_GRAMMARS.update(
    {"rm": _RM, "chmod": _CHMOD, "chown": _CHMOD, "chgrp": _CHMOD, "env": _ENV, "git": _GIT_GLOBAL}
)
WRAPPERS = frozenset(_SIMPLE_WRAPPERS) | _OPAQUE_WRAPPERS | {"env"} | SHELLS


def _env(args: Argv) -> Use:
    words = list(args)
    cwd: str | None = None
    index = 0
    while index < len(words):
        word = words[index]
        if word is None:
            return _ask("env", "env: an argument is computed at run time")
        if word == "--":
            index += 1
            break
        if not word.startswith("-") or word == "-":
            if word == "-":
                index += 1
                continue
            break
        parsed = parse_args(_ENV, (word, *words[index + 1 : index + 2]))
        if parsed.error or not parsed.options:
            return _ask("env", f"env: {parsed.error or 'unparsed option'}")
        opt, value, _ = parsed.options[0]
        consumed = 2 if (opt.arg == "required" and not _attached(word)) else 1
        if opt.canonical == "--split-string":
            if value is None:
                return _ask("env", "env -S without a string")
            if "$" in value or "\\c" in value:
                return _ask("env", "env -S with variables in its string")
            try:
                split = shlex.split(value)
            except ValueError as exc:
                return _ask("env", f"env -S string cannot be split ({exc})")
            words = words[:index] + list(split) + words[index + consumed :]
            continue
        if opt.canonical == "--chdir":
            # the command's relative paths would be judged against the wrong directory
            return _ask("env", "env -C runs the command in another directory")
        index += consumed
    assignments = []
    while (
        index < len(words)
        and words[index] is not None
        and "=" in str(words[index])
        and not str(words[index]).startswith("=")
    ):
        assignments.append(str(words[index]))
        index += 1
    rest = tuple(words[index:])
    if not rest:
        return _ask("env", "env without a command prints the environment, which may hold secrets")
    inner = Inner(argv=rest, transparent=True)
    if assignments:
        names = [a.split("=", 1)[0] for a in assignments]
        unsafe = [n for n in names if not _harmless_variable(n)]
        if unsafe:
            return _ask(
                "env",
                f"env sets {', '.join(unsafe)}, which can change what a program runs",
                inner=(attrs.evolve(inner, transparent=False),),
            )
    return Use(
        verdict="allow",
        reason="env runs the command",
        rule="model:env",
        cwd=cwd,
        reads=(cwd,) if cwd else (),
        inner=(inner,),
    )


def _attached(word: str) -> bool:
    """Whether an option word carries its value (``--x=v``, ``-xv``)."""
    if word.startswith("--"):
        return "=" in word
    return len(word) > 2


_HARMLESS_VARIABLES = re.compile(
    r"^(?:LANG|LANGUAGE|LC_[A-Z]+|TZ|NO_COLOR|FORCE_COLOR|CLICOLOR|CLICOLOR_FORCE|COLUMNS|LINES"
    r"|TERM|GIT_PAGER|PAGER|POSIXLY_CORRECT|PYTHONDONTWRITEBYTECODE|PYTHONUNBUFFERED|CI)$"
)


def _harmless_variable(name: str) -> bool:
    return _HARMLESS_VARIABLES.match(name) is not None


def harmless_assignment(text: str) -> bool:
    """Whether ``NAME=value`` cannot change which program runs or what it loads."""
    name, _, value = text.partition("=")
    if name in ("GIT_PAGER", "PAGER"):
        return value in ("cat", "")
    return _harmless_variable(name)


def _shell(name: str, args: Argv) -> Use:
    index = 0
    wants_c = False
    reads_stdin = False
    while index < len(args):
        word = args[index]
        if word is None:
            return _ask(name, f"{name}: an option is computed at run time")
        if word in ("--", "-"):
            index += 1
            break
        if word.startswith("--"):
            if word in ("--rcfile", "--init-file"):
                return _ask(name, f"{name} {word} runs a start-up file")
            index += 1
            continue
        if word[:1] in "-+" and len(word) > 1:
            cluster = word[1:]
            wants_c = wants_c or "c" in cluster
            reads_stdin = reads_stdin or "s" in cluster
            if "o" in cluster or "O" in cluster:
                index += 1
            index += 1
            continue
        break
    bash = name in _BASH_LIKE
    if wants_c:
        if index >= len(args) or args[index] is None:
            return _ask(name, f"{name} -c runs text computed at run time or missing")
        script = str(args[index])
        rest = args[index + 1 :]
        inner = Inner(
            script=script, bash_syntax=bash, transparent=bash and all(a is not None for a in rest)
        )
        if not bash:
            return _ask(
                name, f"{name} -c: {name} syntax is not bash's, so it is not proved", inner=(inner,)
            )
        return Use(
            verdict="allow",
            reason=f"{name} -c runs the script",
            rule=f"model:{name}",
            inner=(inner,),
        )
    if index >= len(args) or reads_stdin:
        return _ask(name, f"{name} reads commands from its standard input")
    return _ask(name, f"{name} runs the script file {args[index]!r}, which the policy cannot see")


def _simple_wrapper(name: str, args: Argv) -> Use:
    parsed_options: list[str] = []
    gram = _SIMPLE_WRAPPERS[name]
    index = 0
    script_value: str | None = None
    while index < len(args):
        word = args[index]
        if word is None:
            return _ask(name, f"{name}: an argument is computed at run time")
        if word == "--":
            index += 1
            break
        if not word.startswith("-") or word == "-":
            break
        if name == "nice" and re.fullmatch(r"-[0-9]+", word):
            index += 1
            continue
        parsed = parse_args(gram, (word, *args[index + 1 : index + 2]))
        if parsed.error or not parsed.options:
            return _ask(name, f"{name}: {parsed.error or 'unparsed option'}")
        consumed = 1
        for opt, value, _ in parsed.options:
            if opt.role == "unsafe":
                return _ask(name, f"{name} {word}: {opt.why}")
            parsed_options.append(opt.canonical)
            if opt.canonical in ("--command", "-c") and value is not None:
                script_value = value
            if opt.arg == "required" and not _attached(word):
                consumed = 2
        index += consumed
    rest = args[index:]
    if name == "timeout":
        rest = rest[1:]  # the duration
    elif name in ("chroot", "sg"):
        if name == "chroot" and rest:
            return _ask(
                name,
                "chroot changes the root directory",
                inner=(Inner(argv=rest[1:], transparent=False),) if len(rest) > 1 else (),
            )
        if name == "sg" and len(rest) > 1:
            if rest[1] == "-c" and len(rest) > 2 and rest[2] is not None:
                return _ask(
                    name,
                    "sg runs a command as another group",
                    inner=(Inner(script=rest[2], transparent=False),),
                )
            return _ask(
                name,
                "sg runs a command as another group",
                inner=(Inner(argv=rest[1:], transparent=False),),
            )
        return _ask(name, f"{name} changes privileges")
    elif name == "flock":
        if script_value is not None:
            return _ask(
                name,
                "flock -c runs a shell command and creates a lock file",
                inner=(Inner(script=script_value, transparent=False),),
            )
        if len(rest) >= 1:
            return _ask(
                name,
                "flock creates a lock file and runs a command",
                inner=(Inner(argv=rest[1:], transparent=False),) if len(rest) > 1 else (),
            )
    elif name == "script":
        inner_s = (Inner(script=script_value, transparent=False),) if script_value else ()
        return _ask(name, "script runs a shell and writes a typescript file", inner=inner_s)
    elif name == "watch":
        if "--exec" in parsed_options:
            return _ask(
                name,
                "watch runs a command repeatedly",
                inner=(Inner(argv=rest, transparent=False),),
            )
        text = " ".join(str(r) for r in rest if r is not None)
        return _ask(
            name, "watch runs a command repeatedly", inner=(Inner(script=text, transparent=False),)
        )
    elif name == "time":
        if "--output" in parsed_options or "--append" in parsed_options:
            return _ask(name, "time -o writes a file", inner=(Inner(argv=rest, transparent=False),))
    elif name == "command" and ("-v" in parsed_options or "-V" in parsed_options):
        return _allow(name, "command -v only looks a name up")
    elif name == "xargs":
        if not rest:
            rest = ("echo",)
        inner_argv = (*(None if (a is not None and "{}" in a) else a for a in rest), None)
        return _ask(
            name,
            "xargs runs a command with arguments read from its input",
            inner=(Inner(argv=inner_argv, transparent=False),),
        )
    if not rest:
        if name in ("exec", "nice", "command", "builtin"):
            return _allow(name, f"{name} without a command")
        return _ask(name, f"{name} without a command")
    transparent = name in _TRANSPARENT
    inner = Inner(argv=rest, transparent=transparent)
    if not transparent:
        return _ask(name, f"{name} is not a transparent wrapper", inner=(inner,))
    return Use(
        verdict="allow", reason=f"{name} runs the command", rule=f"model:{name}", inner=(inner,)
    )


def _opaque(name: str, args: Argv) -> Use:
    """A wrapper whose grammar is not modelled: every later word may start a command."""
    candidates: list[Inner] = []
    if name == "busybox" and args and args[0] is not None:
        return _ask(name, "busybox runs an applet", inner=(Inner(argv=args, transparent=False),))
    if name in ("su", "runuser") and args:
        for i, word in enumerate(args[:-1]):
            if word in ("-c", "--command") and args[i + 1] is not None:
                candidates.append(Inner(script=args[i + 1], transparent=False))
    for start in range(len(args)):
        word = args[start]
        if word is not None and not word.startswith("-"):
            candidates.append(Inner(argv=args[start:], transparent=False))
        if len(candidates) > 32:
            break
    return _ask(
        name,
        f"{name} runs another command in a way that is not proved safe",
        inner=tuple(candidates),
    )


def _version(name: str, args: Argv) -> Use | None:
    if name not in _VERSION_QUERY and not re.fullmatch(r"python3(?:\.[0-9]+)?", name):
        return None
    if args == ("--version",) or (args == ("-V",) and name.startswith("python")):
        return _allow(name, f"{name} {args[0]} only prints a version")
    return None


def _cd(args: Argv) -> Use:
    parsed = parse_args(_G["cd"], args)
    operands = _static(parsed.operands) if not parsed.error else None
    if operands is None or len(operands) > 1:
        return _ask("cd", f"cd: {parsed.error or 'an unusual operand'}")
    target = operands[0] if operands else (os.environ.get("HOME") or os.path.expanduser("~"))
    if target == "-":
        return _ask("cd", "cd - depends on the shell's previous directory")
    return Use(
        verdict="allow", reason="cd changes directory", rule="model:cd", cwd=target, reads=(target,)
    )


def _echo(args: Argv) -> Use:
    # bash's echo takes only leading words made of n, e and E as options; the rest is text
    if any(a is None for a in args):
        return _ask("echo", "echo: an argument is computed at run time")
    return _allow("echo")


def _printf(args: Argv) -> Use:
    if args and args[0] is not None and args[0].startswith("-v"):
        return _ask("printf", "printf -v assigns a shell variable")
    if any(a is not None and re.search(r"%[^%a-zA-Z]*n", a) for a in args):
        return _ask("printf", "printf %n assigns a shell variable")
    if any(a is None for a in args):
        return _ask("printf", "printf: an argument is computed at run time")
    return _allow("printf")


def _eval(name: str, args: Argv) -> Use:
    if name != "eval":
        return _ask(name, f"{name} runs a script file the policy cannot see")
    if any(a is None for a in args):
        return _ask(name, "eval of text computed at run time")
    return _ask(
        name,
        "eval runs text as a command line; it is never proved safe",
        inner=(Inner(script=" ".join(str(a) for a in args), transparent=False),),
    )


def _builtin_text(name: str, args: Argv) -> Use:
    if any(a is None for a in args):
        return _ask(name, f"{name}: an argument is computed at run time")
    if name in ("test", "[") and any("$" in a or "`" in a for a in args if a is not None):
        # bash evaluates an array subscript (test -v 'a[$(cmd)]'), running what is inside
        return _ask(name, f"{name}: an operand holds '$' or '`', which bash may evaluate")
    return _allow(name)


_DISPATCH: dict[str, Callable[[str, Argv], Use]] = {
    "sed": lambda _n, a: _sed(a),
    "find": lambda _n, a: _find(a),
    "git": lambda _n, a: _git(a),
    "env": lambda _n, a: _env(a),
    "cd": lambda _n, a: _cd(a),
    "printf": lambda _n, a: _printf(a),
    "echo": lambda _n, a: _echo(a),
    "eval": _eval,
    "source": _eval,
    ".": _eval,
    **dict.fromkeys(("awk", "gawk", "mawk", "nawk"), _awk),
    **dict.fromkeys(_BUILTIN_TEXT, _builtin_text),
    **dict.fromkeys(SHELLS, _shell),
    **dict.fromkeys(_SIMPLE_WRAPPERS, _simple_wrapper),
    **dict.fromkeys(_OPAQUE_WRAPPERS, _opaque),
}
SAFE_PROGRAMS: frozenset[str] = frozenset(
    (set(_G) - {"mkdir", "touch", "tee", "cp", "mv"})
    | {"sed", "find", "git", "cd", "printf"}
    | _BUILTIN_TEXT
)
"""Programs with a model that can prove a call read-only (given its options and paths)."""


def describe(argv: Argv) -> Use:
    """What ``argv`` does, by its program's model (``argv[0]`` must be static)."""
    name = posixpath.basename(str(argv[0]))
    args = argv[1:]
    if "/" in str(argv[0]):
        use = describe((name, *args)) if name in WRAPPERS else None
        inner = use.inner if use is not None else ()
        return _ask(
            name,
            f"{argv[0]!r} names a program by path, not from the safe set",
            inner=inner,
            rule="path-qualified",
        )
    version = _version(name, args)
    if version is not None:
        return version
    handler = _DISPATCH.get(name)
    if handler is not None:
        return handler(name, args)
    if name in _G:
        return _generic(name, args)
    return Use(verdict="ask", reason=f"{name!r} is not in the safe set", rule="unknown-program")
