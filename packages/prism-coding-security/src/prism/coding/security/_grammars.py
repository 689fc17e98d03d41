"""The data the program models read: option grammars and the sets programs belong to.

Kept apart from the models (:mod:`._programs`), which interpret argvs with them.
"""

from __future__ import annotations

import re

from ._argv import Grammar, grammar

__all__ = [
    "BASH_LIKE",
    "BUILTIN_TEXT",
    "DISPATCHED_VERSION_QUERY",
    "ENV_GRAMMAR",
    "FIND_EXEC",
    "FIND_FLAGS",
    "FIND_READ_VALUES",
    "FIND_TESTS_WITH_VALUE",
    "GIT_CONFIG_READ",
    "GIT_GLOBAL",
    "GIT_SUBCOMMANDS",
    "HARMLESS_VARIABLES",
    "NO_OPERANDS",
    "OPAQUE_WRAPPERS",
    "PROGRAM_GRAMMARS",
    "READ_OPERANDS",
    "RULE_GRAMMARS",
    "SHELLS",
    "SIMPLE_WRAPPERS",
    "TEXT_OPERANDS",
    "TRANSPARENT",
    "VERSION_QUERY",
    "WRAPPERS",
]


# -- option grammars -------------------------------------------------------------------

COLOR = "--color=?|--colour=?"
PROGRAM_GRAMMARS: dict[str, Grammar] = {
    "ls": grammar(
        "-a|--all -A|--almost-all --author -b|--escape --block-size= -B|--ignore-backups -c -C"
        " " + COLOR + " -d|--directory -D|--dired -f -F|--classify=? --file-type --format="
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
        " -w|--word-regexp -x|--line-regexp -c|--count " + COLOR + " -L|--files-without-match"
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
        "--normal -q|--brief -s|--report-identical-files -c -C=|--context=? -u -U=|--unified=?"
        " -e|--ed -n|--rcs -y|--side-by-side -W|--width= --left-column --suppress-common-lines"
        " -p|--show-c-function -F|--show-function-line= --label= -t|--expand-tabs -T|--initial-tab"
        " --tabsize= --suppress-blank-empty x:-l|--paginate x:-r|--recursive --no-dereference"
        " -N|--new-file --unidirectional-new-file --ignore-file-name-case"
        " --no-ignore-file-name-case -x|--exclude= r:-X|--exclude-from= -S|--starting-file="
        " r:--from-file= r:--to-file= -i|--ignore-case -E|--ignore-tab-expansion"
        " -Z|--ignore-trailing-space -b|--ignore-space-change -w|--ignore-all-space"
        " -B|--ignore-blank-lines -I|--ignore-matching-lines= -a|--text --strip-trailing-cr"
        " -D|--ifdef= --GTYPE-group-format= --line-format= --LTYPE-line-format="
        " -d|--minimal --horizon-lines= --speed-large-files " + COLOR + " --palette=",
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
        "-A|--address-radix= --endian= -j|--skip-bytes= -N|--read-bytes= -S=|--strings=?"
        " -t|--format= -v|--output-duplicates -w=?|--width=? --traditional -a -b -c -d -f -i -l -o"
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
        " -q|--quiet r:--relative-to= r:--relative-base= -s|--strip|--no-symlinks -z|--zero"
    ),
    "readlink": grammar(
        "-f|--canonicalize -e|--canonicalize-existing -m|--canonicalize-missing"
        " -n|--no-newline -q|--quiet -s|--silent -v|--verbose -z|--zero"
    ),
    "tree": grammar(
        "-a -d -f -i -q -N -Q -p -u -g -s -h --si --du -D --timefmt= -F -C -n -A -S -v -t -c -U -r"
        " --dirsfirst --filesfirst -L= -P= -I= --gitignore --matchdirs --ignore-case --noreport"
        " --prune --charset= --filelimit= --sort= -J -X --inodes --device -x"
        " x:-l x:-o= x:-R x:-H= x:--fromfile",
        # tree gives a value option of a cluster the NEXT word (`-Lo 2 out` writes out)
        clusters=False,
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
        "-d|--date= --debug r:-f|--file= -I=?|--iso-8601=? --resolution -R|--rfc-email"
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
        " -e|--exit-status x:--arg= x:--argjson= --args --jsonargs --raw-output0"
        " x:-f|--from-file= x:-L= x:--slurpfile= x:--rawfile="
    ),
    "sed": grammar(
        "-n|--quiet|--silent --debug -e|--expression= -E|-r|--regexp-extended -s|--separate"
        " --posix -u|--unbuffered -z|--null-data -l|--line-length= --sandbox"
        " -b|--binary --follow-symlinks x:-f|--file= w:-i=?|--in-place=?"
    ),
    "awk": grammar(
        "-F|--field-separator= -v|--assign= -e|--source= -b|--characters-as-bytes"
        " -c|--traditional -P|--posix -s|--no-optimize -O|--optimize -S|--sandbox"
        " -N|--use-lc-numeric -n|--non-decimal-data -t|--lint-old"
        " x:-f|--file= x:-i|--include= x:-l|--load= x:-E|--exec= x:-d=?|--dump-variables=?"
        " x:-D=?|--debug=? x:-p=?|--profile=? x:-o=?|--pretty-print=? x:-L=?|--lint=?"
        " x:-M|--bignum",
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
        " -u|--update=? --attributes-only --debug -T|--no-target-directory x:-b x:--backup=?"
        " x:-S|--suffix= --strip-trailing-slashes --sparse= --reflink=?"
        " x:-r|-R|--recursive x:-a|--archive x:-d x:-l|--link x:-s|--symbolic-link"
        " x:-L|--dereference x:-P|--no-dereference x:-H x:-x|--one-file-system x:--parents"
        " x:-t|--target-directory= x:--remove-destination x:--copy-contents"
        " x:--keep-directory-symlink"
    ),
    "mv": grammar(
        "-i|--interactive -n|--no-clobber -f|--force -v|--verbose -u|--update=? x:-b x:--backup=?"
        " x:-S|--suffix= -T|--no-target-directory --strip-trailing-slashes --debug"
        " --no-copy --exchange x:-t|--target-directory="
    ),
}
PROGRAM_GRAMMARS["egrep"] = PROGRAM_GRAMMARS["fgrep"] = PROGRAM_GRAMMARS["grep"]
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
    PROGRAM_GRAMMARS[_alg] = PROGRAM_GRAMMARS["sum"]
PROGRAM_GRAMMARS["false"] = PROGRAM_GRAMMARS["true"]
PROGRAM_GRAMMARS["gawk"] = PROGRAM_GRAMMARS["mawk"] = PROGRAM_GRAMMARS["nawk"] = PROGRAM_GRAMMARS[
    "awk"
]

# -- git ---------------------------------------------------------------------------------

GIT_GLOBAL = grammar(
    "c:-C= -p|--paginate -P|--no-pager --no-replace-objects --literal-pathspecs"
    " --glob-pathspecs --noglob-pathspecs --icase-pathspecs --no-optional-locks"
    " --no-advice --version"
    " x:-c= x:--config-env= x:--exec-path=? x:--git-dir= x:--work-tree= x:--namespace= x:--bare"
    " x:--super-prefix= x:--html-path x:--man-path x:--info-path x:--list-cmds= x:--help",
    permute=False,
)
_DIFF_OPTS = (
    "-p|-u|--patch -s|--no-patch -U=?|--unified=? --output-indicator-new= --output-indicator-old="
    " --output-indicator-context= --raw --patch-with-raw -t --indent-heuristic"
    " --no-indent-heuristic --minimal --patience --histogram --anchored= --diff-algorithm="
    " --stat=? --compact-summary --numstat --shortstat -X=?|--dirstat=? --cumulative"
    " --dirstat-by-file=? --summary --patch-with-stat -z --name-only --name-status --submodule=?"
    " " + COLOR + " --no-color --color-moved=? --no-color-moved --color-moved-ws="
    " --no-color-moved-ws --word-diff=? --word-diff-regex= --color-words=? --no-renames"
    " --rename-empty --no-rename-empty --check --ws-error-highlight= --full-index --binary"
    " --abbrev=? -B=?|--break-rewrites=? -M=?|--find-renames=? -C=?|--find-copies=?"
    " --find-copies-harder -D|--irreversible-delete -l= --diff-filter= -S= -G= --find-object="
    " --pickaxe-all --pickaxe-regex -R --relative=? --no-relative -a|--text"
    " --ignore-cr-at-eol --ignore-space-at-eol -b|--ignore-space-change -w|--ignore-all-space"
    " --ignore-blank-lines -I|--ignore-matching-lines= --inter-hunk-context= -W|--function-context"
    " --exit-code --quiet --no-ext-diff x:--textconv --no-textconv --ignore-submodules=?"
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
    "--cached --untracked --no-index --no-exclude-standard --exclude-standard"
    " x:--recurse-submodules -a|--text x:--textconv --no-textconv -i|--ignore-case -I"
    " --max-depth= -r|--recursive"
    " --no-recursive -w|--word-regexp -v|--invert-match -h -H --full-name -E|--extended-regexp"
    " -G|--basic-regexp -P|--perl-regexp -F|--fixed-strings -n|--line-number --column"
    " -l|--files-with-matches --name-only -L|--files-without-match -z|--null -o|--only-matching"
    " -c|--count " + COLOR + " --no-color --break --heading -p|--show-function"
    " -A|--after-context= -B|--before-context= -C|--context= -W|--function-context"
    " -m|--max-count= --threads= -e= --and --or --not --all-match -q|--quiet r:-f="
    " x:-O=?|--open-files-in-pager=?",
    numeric=True,
)
GIT_SUBCOMMANDS: dict[str, Grammar] = {
    "status": grammar(
        "-s|--short -b|--branch --show-stash --porcelain=? --long -v|--verbose"
        " -u=?|--untracked-files=? --ignore-submodules=? --ignored=? -z --column=? --no-column"
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
        " --no-contains=? --merged=? --no-merged=? --sort= --format= " + COLOR + " --no-color"
        " --column=? --no-column --points-at= -i|--ignore-case --abbrev=? --no-abbrev -q|--quiet"
    ),
    "tag": grammar(
        "-l|--list -n= --sort= --format= --contains=? --no-contains=? --points-at=? --merged=?"
        " --no-merged=? -i|--ignore-case --column=? --no-column " + COLOR
    ),
    "rev-parse": grammar(
        "--show-toplevel --git-dir --git-common-dir --absolute-git-dir --abbrev-ref=? --short=?"
        " --verify -q|--quiet --is-inside-work-tree --is-inside-git-dir --is-bare-repository"
        " --is-shallow-repository --show-prefix --show-cdup --symbolic --symbolic-full-name --sq"
        " --all --branches=? --tags=? --remotes=? --glob= --default= --revs-only --no-revs"
        " --flags --no-flags --path-format= --show-superproject-working-tree"
        " --show-object-format=? --show-ref-format --local-env-vars --since= --until= --not"
        " --git-path= r:--resolve-git-dir= --shared-index-path"
    ),
    "ls-files": grammar(
        "-c|--cached -d|--deleted -m|--modified -o|--others -i|--ignored -s|--stage"
        " -u|--unmerged -k|--killed -z -t -v -f --directory --no-empty-directory --eol"
        " --full-name x:--recurse-submodules --error-unmatch --exclude-standard --deduplicate"
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
        "--head --branches --tags -d|--dereference -s=?|--hash=? --abbrev=? --verify --exists"
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
GIT_CONFIG_READ = grammar(
    "--get --get-all --get-regexp --get-urlmatch -l|--list --show-origin --show-scope"
    " --name-only -z|--null --local --worktree r:-f|--file= r:--blob="
    " --type= --bool --int --bool-or-int --path --expiry-date --default= --no-includes"
    " --fixed-value --all --regexp= --value= --url= x:--global x:--system x:--includes"
)

# -- the safe set --------------------------------------------------------------------------

SHELLS = frozenset(
    {"sh", "bash", "dash", "ash", "rbash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh"}
)
BASH_LIKE = frozenset({"sh", "bash", "dash", "ash", "rbash"})
# `X --version` is proved only for programs that answer it themselves. A language
# toolchain's command is often a version manager's proxy that picks the program
# to run from the project's own files (rustup: `rust-toolchain.toml` may name a
# toolchain by path, even `/proc/self/cwd/...`; yarn: `yarnPath` in `.yarnrc.yml`;
# corepack: `packageManager`; pyenv, rbenv, asdf and mise: `.python-version`,
# `.tool-versions`, `mise.toml`; pytest loads `conftest.py` before it answers), so
# in a hostile checkout `cargo --version` runs the checkout's program. Those ask
# (or, confined, run in the sandbox like any other unproved line).
VERSION_QUERY = frozenset(
    {
        "gcc",
        "g++",
        "cc",
        "clang",
        "make",
        "cmake",
        "git",
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
# The toolchains whose `--version` asks for that reason (named in the refusal).
DISPATCHED_VERSION_QUERY = frozenset(
    {
        "python",
        "python3",
        "node",
        "npm",
        "npx",
        "pnpm",
        "yarn",
        "corepack",
        "deno",
        "bun",
        "go",
        "rustc",
        "cargo",
        "rustup",
        "java",
        "javac",
        "uv",
        "pip",
        "pip3",
        "ruby",
        "perl",
        "php",
        "pytest",
        "ruff",
        "mypy",
        "tsc",
        "terraform",
    }
)

READ_OPERANDS = frozenset(
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
TEXT_OPERANDS = frozenset(
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
NO_OPERANDS = frozenset({"pwd", "hostname"})
BUILTIN_TEXT = frozenset({":", "test", "[", "type"})


_RM = grammar(
    "-f|--force -i -I --interactive=? --one-file-system --no-preserve-root --preserve-root=?"
    " -r|-R|--recursive -d|--dir -v|--verbose"
)
_CHMOD = grammar(
    "-c|--changes -f|--silent|--quiet -v|--verbose --no-preserve-root --preserve-root"
    " --reference= -R|--recursive -h|--no-dereference --dereference -H -L -P --from="
)


RULE_GRAMMARS: dict[str, Grammar] = {}


FIND_TESTS_WITH_VALUE = frozenset(
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
FIND_FLAGS = frozenset(
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
FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
FIND_READ_VALUES = frozenset({"-newer", "-anewer", "-cnewer", "-samefile", "-neweraa", "-newermm"})


ENV_GRAMMAR = grammar(
    "-i|--ignore-environment -0|--null -u|--unset= c:-C|--chdir= -S|--split-string="
    " -v|--debug --block-signal=? --default-signal=? --ignore-signal=? --list-signal-handling"
    " -a|--argv0=",
    permute=False,
)
SIMPLE_WRAPPERS: dict[str, Grammar] = {
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
        "-0|--null r:-a|--arg-file= -d|--delimiter= -E= -e=?|--eof=? -I= -i=?|--replace=?"
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
        " -q|--quiet -t=?|--timing=?",
        permute=False,
    ),
    "chroot": grammar("--userspec= --groups= --skip-chdir", permute=False),
    "sg": grammar("", permute=False),
    "watch": grammar(
        "-b|--beep -c|--color -C|--no-color -d=?|--differences=? -e|--errexit -g|--chgexit"
        " -n|--interval= -p|--precise -q|--equexit= -r|--no-rerun -t|--no-title -w|--no-wrap"
        " -x|--exec",
        permute=False,
    ),
    "time": grammar(
        "-a|--append -f|--format= -o|--output= -p|--portability -q|--quiet -v|--verbose",
        permute=False,
    ),
}
TRANSPARENT = frozenset(
    {"nice", "nohup", "setsid", "stdbuf", "command", "builtin", "exec", "ionice", "timeout", "env"}
)
OPAQUE_WRAPPERS = frozenset(
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
RULE_GRAMMARS.update(
    {
        "rm": _RM,
        "chmod": _CHMOD,
        "chown": _CHMOD,
        "chgrp": _CHMOD,
        "env": ENV_GRAMMAR,
        "git": GIT_GLOBAL,
    }
)
WRAPPERS = frozenset(SIMPLE_WRAPPERS) | OPAQUE_WRAPPERS | {"env"} | SHELLS


HARMLESS_VARIABLES = re.compile(
    r"^(?:LANG|LANGUAGE|LC_[A-Z]+|TZ|NO_COLOR|FORCE_COLOR|CLICOLOR|CLICOLOR_FORCE|COLUMNS|LINES"
    r"|TERM|GIT_PAGER|PAGER|PYTHONDONTWRITEBYTECODE|PYTHONUNBUFFERED|CI)$"
)
