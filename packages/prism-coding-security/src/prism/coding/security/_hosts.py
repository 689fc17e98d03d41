"""The hosts a network command's own arguments name, for escalation questions.

An approval can open the network to one call only for hosts the command's argv
names exactly (the grant goes into that call's HTTPS proxy, so whatever else
the program reaches is still refused). For each program known to use the
network this module says which ``host:port`` it names:

* through the proxy (``proxied``): ``curl``/``wget`` URLs; the repository URL
  of ``git clone|fetch|pull|push|ls-remote`` (``https://``/``http://``);
  ``pip`` (also ``python -m pip`` and ``uv pip``) with ``--index-url``, or
  ``--no-index``, plus ``--extra-index-url``, ``--find-links`` and URL
  requirements; ``npm``/``pnpm``/``yarn`` with ``--registry``;
* directly (``direct``: not through a proxy, so no approval can open it):
  ``ssh``, and git's ``ssh://``, ``git://`` and ``host:path`` repositories;
* or why it names none (``unnamed``): a git remote by name, pip or npm without
  an index or registry on the command line (their configuration chooses),
  a host that is not one plain name, an option this module does not know.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
from urllib.parse import urlsplit

import attrs

from ._argv import grammar, parse_args

__all__ = ["Named", "named_hosts", "plain_host", "url_host_port"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")
# a word the shell computes at run time, as the judge shows it (as written)
_COMPUTED = re.compile(r"[$`\"'\\]")


@attrs.frozen
class Named:
    """What one command's argv says about the hosts it connects to."""

    proxied: tuple[str, ...] = ()
    direct: tuple[str, ...] = ()
    unnamed: str | None = None


def plain_host(host: str) -> bool:
    """A DNS name or a dotted-quad IPv4 address, spelled so that it names one host.

    The grant goes into the proxy's allowlist as written, and what it means there
    is what the question said: no ``*`` (a wildcard there), no character outside
    a host name (``%``-escapes, non-ASCII), and no IPv4 address in another form
    (``2130706433``, ``127.1``, ``0x7f.0.0.1`` are 127.0.0.1 to a resolver).
    """
    if not host or len(host) > 253:
        return False
    labels = host.split(".")
    if not all(_LABEL.fullmatch(label) for label in labels):
        return False
    if _NUMERIC_LABEL.fullmatch(labels[-1]):  # a resolver reads it as an IPv4 address
        try:
            return str(ipaddress.IPv4Address(host)) == host
        except ValueError:
            return False
    return True


def _target(host: str, port: int) -> str | None:
    """``host:port`` (``[v6]:port``), or None when ``host`` is not one plain host."""
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(host).version == 6:
            return f"[{host}]:{port}"
    host = host.rstrip(".")
    return f"{host}:{port}" if plain_host(host) else None


def url_host_port(word: str, schemes: dict[str, int] = _DEFAULT_PORTS) -> str | None:
    """``host:port`` of a URL whose scheme is in ``schemes`` (default ports), or None."""
    if "://" not in word or _COMPUTED.search(word):
        return None
    try:
        parts = urlsplit(word)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname
    if scheme not in schemes or not host:
        return None
    return _target(host, port or schemes[scheme])


# '<transport>::<address>': git runs the remote helper git-remote-<transport>
_HELPER = re.compile(r"[A-Za-z0-9][A-Za-z0-9+.-]*::")
_SSH_SCHEMES = {"ssh": 22, "git+ssh": 22, "ssh+git": 22, "git": 9418}
_SCP_LIKE = re.compile(r"(?:[^@/:]+@)?([^@/:\[\]]+):(?!//)")


def _repository(url: str | None, what: str) -> Named | None:
    """What a git repository argument names; None for a local path (no network)."""
    if url is None or _COMPUTED.search(url):
        return Named(unnamed=f"{what}: the repository is computed at run time")
    if _HELPER.match(url):
        return Named(
            unnamed=f"{what}: a remote helper ({url.split('::', 1)[0]}::) chooses the host"
        )
    scheme = url.split("://", 1)[0].lower() if "://" in url else None
    if scheme in _DEFAULT_PORTS:
        target = url_host_port(url)
        if target is None:
            return Named(unnamed=f"{what}: {url!r} does not name one plain host")
        return Named(proxied=(target,))
    if scheme in _SSH_SCHEMES:
        target = url_host_port(url, _SSH_SCHEMES)
        if target is None:
            return Named(unnamed=f"{what}: {url!r} does not name one plain host")
        return Named(direct=(target,))
    if scheme == "file":
        return None
    if scheme is not None:
        return Named(unnamed=f"{what}: the {scheme}:// transport is not one the proxy carries")
    colon, slash = url.find(":"), url.find("/")
    if colon < 0 or (0 <= slash < colon):
        return None  # a local path, as git reads it
    match = _SCP_LIKE.match(url)
    target = _target(match.group(1), 22) if match else None
    if target is None:
        return Named(unnamed=f"{what}: {url!r} does not name one plain host")
    return Named(direct=(target,))


_GIT_GLOBAL = grammar(
    "-C= -c= --config-env= --exec-path=? --git-dir= --work-tree= --namespace= --bare"
    " -p|--paginate -P|--no-pager --no-replace-objects --literal-pathspecs --glob-pathspecs"
    " --noglob-pathspecs --icase-pathspecs --no-optional-locks --no-advice",
    permute=False,
)
_GIT_COMMON = (
    " -q|--quiet -v|--verbose --progress --no-progress -4|--ipv4 -6|--ipv6 --upload-pack="
    " -o|--server-option= -j|--jobs= --depth= --deepen= --shallow-since= --shallow-exclude="
    " --unshallow --update-shallow --filter= --no-filter --recurse-submodules=?"
    " --no-recurse-submodules --tags --no-tags --dry-run --prune --no-prune --prune-tags"
    " --refmap= --negotiation-tip= --all --atomic --no-auto-maintenance --no-auto-gc"
    " --write-fetch-head --no-write-fetch-head --show-forced-updates --no-show-forced-updates"
)
_GIT_REMOTE = {
    "clone": grammar(
        _GIT_COMMON + " -l|--local --no-local -s|--shared --no-hardlinks --reference="
        " --reference-if-able= --dissociate --bare --sparse --mirror -b|--branch= --origin="
        " --template= --separate-git-dir= -c|--config= --single-branch --no-single-branch"
        " --shallow-submodules --no-shallow-submodules --remote-submodules --no-checkout"
        " --also-filter-submodules --bundle-uri= --ref-format= --revision= --reject-shallow"
    ),
    "fetch": grammar(
        _GIT_COMMON + " -f|--force -p|--prune -P|--prune-tags -t|--tags -n -k|--keep -a|--append"
        " -u|--update-head-ok -m|--multiple --stdin --prefetch --refetch --auto-maintenance"
        " --porcelain --set-upstream"
    ),
    "pull": grammar(
        _GIT_COMMON + " -f|--force -p|--prune -t|--tags -k|--keep -a|--append --set-upstream"
        " -r|--rebase=? --no-rebase --ff --no-ff --ff-only --commit --no-commit"
        " --edit --no-edit --squash --no-squash --stat --no-stat --autostash --no-autostash"
        " -s|--strategy= -X|--strategy-option= -S|--gpg-sign=? --no-gpg-sign --signoff"
        " --verify --no-verify --allow-unrelated-histories --cleanup="
    ),
    "push": grammar(
        _GIT_COMMON + " -f|--force -n -u|--set-upstream --porcelain --repo= --receive-pack= --exec="
        " --mirror --delete -d --follow-tags"
        " --no-follow-tags --force-with-lease=? --force-if-includes --signed=? --no-signed"
        " --push-option= --thin --no-thin --no-verify --verify"
    ),
    "ls-remote": grammar(
        " -q|--quiet --exit-code --get-url --upload-pack= -o|--server-option= --sort="
        " --symref -h|--heads -b|--branches -t|--tags --refs"
    ),
}


def _git(argv: tuple[str, ...]) -> Named | None:
    parsed = parse_args(_GIT_GLOBAL, argv[1:])
    if parsed.error or not parsed.operands or parsed.operands[0] not in _GIT_REMOTE:
        return None
    sub = str(parsed.operands[0])
    what = f"git {sub}"
    rest = parse_args(_GIT_REMOTE[sub], parsed.operands[1:])
    if rest.error:
        return Named(unnamed=f"{what}: {rest.error}")
    urls = [*rest.values("--repo"), *rest.operands[:1]]
    if not urls:
        return Named(
            unnamed=f"{what} names no repository: git takes the remote's URL from the "
            "repository's configuration; give the URL (https://...) on the command line"
        )
    first = rest.operands[0] if rest.operands else None
    if sub != "clone" and first is not None and not any(c in first for c in ":/$`\"'"):
        return Named(
            unnamed=f"{what} {first}: git takes the remote's URL from the repository's "
            "configuration; give the URL (https://...) on the command line"
        )
    return _merge([_repository(url, what) for url in urls])


def _merge(parts: list[Named | None]) -> Named | None:
    found = [p for p in parts if p is not None]
    if not found:
        return None
    unnamed = next((p.unnamed for p in found if p.unnamed), None)
    return Named(
        proxied=tuple(dict.fromkeys(t for p in found for t in p.proxied)),
        direct=tuple(dict.fromkeys(t for p in found for t in p.direct)),
        unnamed=unnamed,
    )


_PIP = grammar(
    "-i|--index-url= --extra-index-url= --no-index -f|--find-links= -r|--requirement="
    " -c|--constraint= -e|--editable= -t|--target= -d|--dest= -w|--wheel-dir= --prefix="
    " --root= --user -U|--upgrade --upgrade-strategy= --force-reinstall -I|--ignore-installed"
    " --no-deps --pre --no-cache-dir --cache-dir= -q|--quiet -v|--verbose --no-build-isolation"
    " --only-binary= --no-binary= --prefer-binary --platform= --python-version="
    " --implementation= --abi= --timeout= --retries= --trusted-host= --cert= --client-cert="
    " --isolated --disable-pip-version-check --no-input --progress-bar= --require-hashes"
    " --break-system-packages --dry-run --report= --no-warn-script-location --no-color"
    " --system -p|--python= --default-index= --index= --offline --no-config --reinstall"
    " --index-strategy= --prerelease= -P|--upgrade-package= --no-cache --native-tls"
)
_REQUIREMENT_URL = re.compile(r"(?:^|[@\s]|git\+)(https?://\S+)$")
_PIP_NETWORK = frozenset({"install", "download", "wheel", "index", "compile", "sync"})


def _pip(args: tuple[str, ...], what: str) -> Named | None:
    if not args or args[0] not in _PIP_NETWORK:
        return None
    what = f"{what} {args[0]}"
    parsed = parse_args(_PIP, args[1:])
    if parsed.error:
        return Named(unnamed=f"{what}: {parsed.error}")
    index = [*parsed.values("--index-url"), *parsed.values("--default-index")]
    if not index and not parsed.has("--no-index"):
        return Named(
            unnamed=f"{what} takes its index from its configuration (pip.conf, "
            "PIP_INDEX_URL, the project's settings); name it with --index-url"
        )
    words = [
        *index,
        *parsed.values("--extra-index-url"),
        *parsed.values("--index"),
        *parsed.values("--find-links"),
        *parsed.values("--editable"),
        *(str(o) for o in parsed.operands),
    ]
    proxied: list[str] = []
    for word in (str(w) for w in words):
        if "://" not in word:
            continue
        # 'name @ https://...', 'git+https://...': the URL is what pip connects to
        found = _REQUIREMENT_URL.search(word)
        target = url_host_port(found.group(1)) if found else None
        if target is None:
            return Named(unnamed=f"{what}: {word!r} does not name one plain host over https")
        proxied.append(target)
    return Named(proxied=tuple(dict.fromkeys(proxied)))


_NPM_NETWORK = frozenset({
    "install", "i", "ci", "add", "update", "up", "upgrade", "view", "info", "show", "v",
    "outdated", "audit", "publish", "search", "dlx", "create", "init", "exec", "fetch",
})  # fmt: skip


def _npm(argv: tuple[str, ...]) -> Named | None:
    registry: list[str] = []
    for index, word in enumerate(argv[1:], start=1):
        if word == "--registry" and index + 1 < len(argv):
            registry.append(argv[index + 1])
        elif word.startswith("--registry="):
            registry.append(word.partition("=")[2])
    what = argv[0]
    if not registry:
        if len(argv) > 1 and argv[1] in _NPM_NETWORK:
            return Named(
                unnamed=f"{what} {argv[1]} takes its registry from its configuration (.npmrc); "
                "name it with --registry"
            )
        return None
    targets = [url_host_port(url) for url in registry]
    if None in targets:
        return Named(unnamed=f"{what}: the registry does not name one plain host over https")
    return Named(proxied=tuple(dict.fromkeys(t for t in targets if t is not None)))


_SSH = grammar(
    "-4 -6 -A -a -C -f -G -g -K -k -M -N -n -q -s -T -t -V -v -X -x -Y -y -B= -b= -c= -D="
    " -E= -e= -F= -I= -i= -J= -L= -l= -m= -O= -o= -P= -Q= -R= -S= -W= -w= -p=",
    permute=False,
)


def _ssh(argv: tuple[str, ...]) -> Named:
    parsed = parse_args(_SSH, argv[1:])
    unknown = Named(unnamed="ssh connects directly, not through the sandbox's HTTPS proxy")
    if parsed.error or not parsed.operands or parsed.operands[0] is None:
        return unknown
    destination = str(parsed.operands[0])
    ports = parsed.values("-p")
    port = ports[-1] if ports else "22"
    if destination.startswith("ssh://"):
        target = url_host_port(destination, {"ssh": int(port) if port and port.isdigit() else 22})
    elif _COMPUTED.search(destination) or not (port and port.isdigit()):
        target = None
    else:
        target = _target(destination.rpartition("@")[2], int(port))
    return unknown if target is None else Named(direct=(target,))


_PYTHON = re.compile(r"python(?:[0-9]+(?:\.[0-9]+)?)?")
_PIPS = re.compile(r"pip(?:[0-9]+(?:\.[0-9]+)?)?")


def named_hosts(program: str, argv: tuple[str, ...]) -> Named | None:
    """What ``argv`` (run as ``program``) names about its connections.

    None: not a program known to use the network.
    """
    if program in ("curl", "wget"):
        proxied = tuple(dict.fromkeys(t for w in argv[1:] if (t := url_host_port(w))))
        if proxied:
            return Named(proxied=proxied)
        return Named(unnamed=f"{program} names no http(s) URL with one plain host")
    if program == "git":
        return _git(argv)
    if _PIPS.fullmatch(program):
        return _pip(argv[1:], program)
    if _PYTHON.fullmatch(program) and argv[1:3] == ("-m", "pip"):
        return _pip(argv[3:], f"{program} -m pip")
    if program in ("npm", "pnpm", "yarn"):
        return _npm(argv)
    if program == "ssh":
        return _ssh(argv)
    return None
