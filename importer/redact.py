"""Credentials out of the snapshot: recognisable secrets become ``[REDACTED:<kind>]``.

Transcripts hold live credentials (API keys pasted in chat, tokens printed by
tools). The store keeps everything as it was written; the snapshot that
Datasette serves gets every text, thinking, tool argument and tool result
with its credentials replaced, and its full-text index is built from the
redacted text.

What is recognised is Yelp's detect-secrets (its plugins' ``denylist``
patterns, used as they are: AWSKeyDetector, BasicAuthDetector,
DiscordBotTokenDetector, GitHubTokenDetector, GitLabTokenDetector,
JwtTokenDetector (with its ``is_formally_valid`` check), OpenAIDetector,
PrivateKeyDetector, SlackDetector, TelegramBotTokenDetector, StripeDetector,
SendGridDetector, PypiTokenDetector, MailchimpDetector, and KeywordDetector's
list of secret-sounding names), plus what it lacks: Anthropic, Google and
current OpenAI project/service keys and other ``sk-`` provider keys, GitHub
fine-grained tokens, npm tokens, Slack app tokens, the whole PEM block after
a BEGIN line, the JWT signature, AWS secret keys beside an access key,
``Authorization:`` / ``Bearer`` values, ``--password VALUE`` and
``mysql -pVALUE``, URLs whose password holds sub-delimiters, and
``password=``/``token:``-style assignments judged by the shape of the value
(detect-secrets' keyword patterns are written for source files and take the
rest of the line as the secret).

Speed: a snapshot scans gigabytes, so every string first goes through
:func:`triggers`, a handful of substring and literal-anchored searches (each
runs at memory speed in C); only strings that trip one run the patterns of
that family.

JSON columns are decoded, their strings redacted (a string under a
secret-sounding key such as ``"password"`` or ``"api_key"`` as a whole when
its value looks like one) and encoded again, so they stay valid JSON.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any, Callable

import orjson

REDACTED = "[REDACTED:{}]"
_MARK = "[REDACTED:"

# -- detect-secrets ------------------------------------------------------------

from detect_secrets.plugins.aws import AWSKeyDetector  # noqa: E402
from detect_secrets.plugins.basic_auth import BasicAuthDetector  # noqa: E402
from detect_secrets.plugins.discord import DiscordBotTokenDetector  # noqa: E402
from detect_secrets.plugins.github_token import GitHubTokenDetector  # noqa: E402
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector  # noqa: E402
from detect_secrets.plugins.jwt import JwtTokenDetector  # noqa: E402
from detect_secrets.plugins.keyword import DENYLIST as _DS_KEYWORDS  # noqa: E402
from detect_secrets.plugins.mailchimp import MailchimpDetector  # noqa: E402
from detect_secrets.plugins.openai import OpenAIDetector  # noqa: E402
from detect_secrets.plugins.private_key import PrivateKeyDetector  # noqa: E402
from detect_secrets.plugins.pypi_token import PypiTokenDetector  # noqa: E402
from detect_secrets.plugins.sendgrid import SendGridDetector  # noqa: E402
from detect_secrets.plugins.slack import SlackDetector  # noqa: E402
from detect_secrets.plugins.stripe import StripeDetector  # noqa: E402
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector  # noqa: E402

# -- the prefilter ---------------------------------------------------------------
# Families of patterns, each behind one cheap trigger.
DASH, UNDER, COLON, DOT, CAPS, JWT, PEM, KEYWORD, GITLAB_RUNNER = (1 << i for i in range(9))

# A literal first character lets Python's re search for it at memory speed;
# the look-behinds then confirm a prefix of one of the formats.
_T_DASH = re.compile(
    r"-(?:(?<=sk-)|(?<=[xX][oO][xX][a-zA-Z]-)|(?<=xapp-)|(?<=gl[a-z]{2}-)|(?<=gl[a-z]{3}-)|(?<=gl[a-z]{4}-)"
    r"|(?<=gl[a-z]{5}-)|(?<=glagent-)|(?<=PuTTY-)|(?<=pypi-)|(?=us\d)|(?<=\s-)p(?=[^\s-]))"
)
_T_UNDER = re.compile(r"_(?:(?<=gh[pousr]_)|(?<=github_pat_)|(?<=k_live_)|(?<=npm_))")
_T_COLON = re.compile(r":(?://[^\s/?#@\"'<>]*:[^\s/?#\"'<>]*@|//hooks\.slack\.com/|(?<=\d:)[\w-]{35})")
_T_DOT = re.compile(r"\.(?:[\w-]{6}\.|(?<=SG\.)[\w-]{22}\.)")
_T_CAPS = re.compile(r"A(?:KIA|SIA|BIA|CCA|3T[A-Z0-9]|Iza)")
# In lower-cased text: KeywordDetector's names all contain one of these; the
# second look keeps only text where one is followed by an assignment, or an
# Authorization/Bearer header, or a --flag and its value.
_KEYWORD_NEEDLES = ("pass", "pwd", "secret", "key", "token", "auth", "bearer", "contras")
_KEY_NAMES = r"(?:api|auth|service|account|db|database|priv|private|client)[_-]?key"  # KeywordDetector's *_?key
# A name may end in one of these after the keyword (apiKeyValue, token_secret, password2); others make it
# something else (password_hash, TokenClient, tokenizer, secretary). KeywordDetector takes any \w*:
# made for code, that flags too much prose and code in transcripts.
_SUFFIX = r"(?:[_-]?(?:access|api|app|client|auth|bot))?(?:[_-]?(?:key|value|secret|token|string|str))?[0-9]*"
_TRIGGER_NAMES = rf"(?:password|passwd|passphrase|(?:db|database|key)[_-]?pass|pwd|secret|{_KEY_NAMES}|token|contrase)"
_KEYWORD_SECOND = re.compile(
    rf"{_TRIGGER_NAMES}{_SUFFIX}[\"'\]]{{0,2}}[ \t]*[:=]|authorization|bearer"
    rf"|--[\w-]*(?:password|passwd|passphrase|token|secret|api-key|apikey|auth-key)[ \t]"
)
_CJK_NEEDLES = ("密码", "口令", "密钥", "令牌")

# All of the above in one pattern for RE2 (google-re2), whose automaton reads
# the text once: several times faster than the searches above, which then
# only run on the few texts it lets through. Without RE2 they run on all.
_ANY_SOURCE = (
    r"sk-|xox[a-zA-Z]-|xapp-|gl[a-z]{2,5}-|glagent-|PuTTY-|pypi-|-us[0-9]|\s-p[^\s-]"
    r"|gh[pousr]_|github_pat_|k_live_|npm_"
    r"|://[^\s/?#@\"'<>]*:[^\s/?#\"'<>]*@|//hooks\.slack\.com/|[0-9]:[0-9A-Za-z_-]{35}"
    r"|\.[0-9A-Za-z_-]{6}\.|SG\.[0-9A-Za-z_-]{22}\."
    r"|AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9]|AIza|eyJ|PRIVATE KEY|GR1348941"
    rf"|(?i:{_TRIGGER_NAMES}{_SUFFIX}[\"'\]]{{0,2}}[ \t]*[:=]|authorization"
    rf"|bearer|--[0-9A-Za-z_-]*(?:password|passwd|passphrase|token|secret|api-key|apikey|auth-key)[ \t])"
    r"|密码|口令|密钥|令牌"
)
try:
    import re2 as _re2

    _ANY = _re2.compile(_ANY_SOURCE)
except Exception:  # not installed, or a build without this platform: the plain searches do it all
    _ANY = None


def maybe(text: str) -> bool:
    """Whether ``text`` could hold a credential (one RE2 pass when available)."""
    if _ANY is not None:
        return _ANY.search(text) is not None
    return bool(triggers(text))


def triggers(text: str) -> int:
    """Which pattern families could match in ``text`` (0: none; most text)."""
    if _ANY is not None and not _ANY.search(text):
        return 0
    found = 0
    if _T_DASH.search(text):
        found |= DASH
    if _T_UNDER.search(text):
        found |= UNDER
    if _T_COLON.search(text):
        found |= COLON
    if _T_DOT.search(text):
        found |= DOT
    if _T_CAPS.search(text):
        found |= CAPS
    if "eyJ" in text:
        found |= JWT
    if "PRIVATE KEY" in text:
        found |= PEM
    if "GR1348941" in text:
        found |= GITLAB_RUNNER
    low = text.lower()
    for needle in _KEYWORD_NEEDLES:
        if needle in low:
            if _KEYWORD_SECOND.search(low):
                return found | KEYWORD
            break
    if not text.isascii():
        for needle in _CJK_NEEDLES:
            if needle in text:
                return found | KEYWORD
    return found


# -- values that look like credentials ------------------------------------------

_PLACEHOLDERS = {
    "none", "null", "nil", "true", "false", "undefined", "required", "optional", "hidden", "redacted", "masked",
    "string", "example", "your", "yes", "empty", "unset", "enabled", "disabled", "secret", "password", "token",
    "changeit", "placeholder", "default", "bearer", "basic", "xxx", "todo", "tbd", "n/a", "sensitive",
}
_NUMERIC = re.compile(r"[\d.:/ +-]+")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z_.]*")
_CONSTANT = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Z]+")  # YOUR_API_KEY, OPENAI_TOKEN: names, not values
_PLACEHOLDER_WORDS = ("your", "here", "example", "placeholder", "dummy", "sample", "xxxx", "redacted", "<", ">")
_ESCAPES_AT_END = re.compile(r"(?:\\[nrt\"'\\])+$")  # a literal \n after a value in escaped text


def looks_secret(value: str, quoted: bool = False) -> bool:
    """Whether the value of a ``password=``/``token:`` assignment looks like a
    credential rather than prose, code, a path, a number or a placeholder."""
    v = value.strip()
    if "\\" in v:
        v = _ESCAPES_AT_END.sub("", v)
    n = len(v)
    if n < 6 or n > 2048 or v.startswith(_MARK):
        return False
    if v[0] in "$<{%*([#@&." or "://" in v or v[1:3] == ":\\" or any(c.isspace() for c in v):
        return False
    if v[0] in "/~" and not (n >= 30 and "." not in v and _aws_secret_shape(v)):
        return False  # a path (a base64 secret may start with a slash too)
    low = v.lower()
    if low in _PLACEHOLDERS or not low.strip("*x•._-#?") or _CONSTANT.fullmatch(v):
        return False
    if any(word in low for word in _PLACEHOLDER_WORDS):
        return False
    if _NUMERIC.fullmatch(v):
        return False
    if not quoted and n < 24 and _IDENTIFIER.fullmatch(v):
        return False  # a name in code (getPassword, config.token) or a word of prose
    digit = upper = lower = symbol = False
    for c in v:
        if c.isdigit():
            digit = True
        elif c.isupper():
            upper = True
        elif c.islower():
            lower = True
        else:
            symbol = True
    if n >= 20:
        return True
    classes = digit + upper + lower + symbol
    return classes >= 2 and (digit or symbol or n >= 8)


# -- the patterns -----------------------------------------------------------------

_BOUND = r"(?<![A-Za-z0-9+/_-])"  # not inside a longer token or a base64 run
_WORD_BOUND = r"(?<![A-Za-z0-9_])"  # not inside a longer token (these formats cannot occur in base64)


def _alt(patterns) -> str:
    return "|".join(f"(?:{p.pattern})" for p in patterns)


class Rule:
    """One kind of credential: a pattern, the part of a match replaced
    (``group``: a number, a name, or a function of the match naming the
    group), and an optional check of that part's original text.

    ``lower``: the pattern is written in lower case and runs on the
    lower-cased text (several times faster than re.IGNORECASE), its spans
    applied to the original; IGNORECASE is the fallback for the rare text
    whose length lower() changes."""

    def __init__(self, kind: str | Callable[[re.Match, str], str | None], family: int, pattern: str | re.Pattern,
                 group: int | str | Callable[[re.Match], str] = 0, check: Callable[[str], bool] | None = None,
                 lower: bool = False):
        self.kind = kind
        self.family = family
        source = pattern.pattern if isinstance(pattern, re.Pattern) else pattern
        if lower:
            self.pattern = re.compile(source)
            self.pattern_i = re.compile(source, re.IGNORECASE)
        else:
            self.pattern = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)
        self.lower = lower
        self.group = group
        self.check = check

    def apply(self, text: str, counts: Counter, low: str | None = None) -> str:
        group, check, kind = self.group, self.check, self.kind
        if self.lower:
            if low is None:
                low = text.lower()
            matches = self.pattern.finditer(low) if len(low) == len(text) else self.pattern_i.finditer(text)
        else:
            matches = self.pattern.finditer(text)
        out: list[str] = []
        pos = 0
        for m in matches:
            g = group(m) if callable(group) else group
            start, end = m.span(g)
            if start < pos:  # no such group, or overlapping what was replaced
                continue
            value = text[start:end]
            if value.startswith(_MARK) or (check is not None and not check(value)):
                continue
            name = kind(m, text) if callable(kind) else kind
            if name is None:
                continue
            counts[name] += 1
            out.append(text[pos:start])
            out.append(REDACTED.format(name))
            pos = end
        if not out:
            return text
        out.append(text[pos:])
        return "".join(out)


def _jwt_valid(token: str) -> bool:
    return JwtTokenDetector.is_formally_valid(token)


def _has_digit(value: str) -> bool:
    return any(c.isdigit() for c in value)


def _aws_secret_shape(value: str) -> bool:
    return (any(c.isupper() for c in value) and any(c.islower() for c in value)
            and any(c.isdigit() or c in "+/" for c in value))


def _url_password(value: str) -> bool:
    """Anything in a URL's password place, but a placeholder (``***``, ``$PASS``, ``<password>``)."""
    return not (value[0] in "$<{%" or value.lower() in _PLACEHOLDERS or not value.strip("*x•._-#?"))


_PASSWORD_WORDS = ("pass", "pwd", "contrase", "密码", "口令")


def _keyword_kind(name: str) -> str:
    low = name.lower()
    return "password" if any(w in low for w in _PASSWORD_WORDS) else "secret"


# KeywordDetector's secret-sounding names, plus token, api-key and passphrase.
_KEYWORDS = "|".join(list(_DS_KEYWORDS) + ["token", "api-key", "passphrase", "密码", "口令", "密钥", "令牌"])
# Suffixes that make the name something else: a count, an id, a file...
_NOT_SECRET_SUFFIX = re.compile(
    r"(?i)(?:s|_?(?:type|id|ids|name|names|file|path|dir|url|uri|count|len|length|size|limit|expir\w*|ttl|"
    r"endpoint|hash|header|field|env|var|prompt|policy|manager|store|ref|format|mode|usage|budget|"
    r"level|index|input|output|usage|estimate|ize|izer|ization|stats|rate|per\w*|max|min))$"
)
_KEY_NAME = re.compile(rf"(?i)(?:{_KEYWORDS})([\w-]*)$|^authorization$|^x-api-key$")


def _name_is_secret(name: str) -> bool:
    m = _KEY_NAME.search(name)
    if m is None:
        return False
    suffix = m.group(1) or ""
    return not (suffix and _NOT_SECRET_SUFFIX.search(suffix))


def _inside_marker(text: str, at: int) -> bool:
    """Whether position ``at`` is inside a marker already written
    ("[REDACTED:github_token]: ..." names no new secret)."""
    before = text[max(0, at - 40): at]
    mark = before.rfind(_MARK)
    return mark >= 0 and "]" not in before[mark:]


def _assignment_kind(m: re.Match, text: str) -> str | None:
    if m.group("suffix") and _NOT_SECRET_SUFFIX.search(m.group("suffix")):
        return None
    group = _assignment_value(m)
    if not looks_secret(text[m.start(group):m.end(group)], quoted=group == "qv"):
        return None
    if _inside_marker(text, m.start()):
        return None
    return _keyword_kind(m.group("key"))


def _assignment_value(m: re.Match) -> str:
    return "qv" if m.group("qv") is not None else "uv"


# Written in lower case: runs on lower-cased text (see Rule).
_ASSIGNMENT = (
    rf"(?P<key>{_KEYWORDS})(?P<suffix>{_SUFFIX})(?P<close>[\"'\]]{{0,2}})[ \t]*(?P<op>:=|=>|==?|:|：)[ \t]*"
    # quoted (also \"escaped\" inside text), or up to a space, quote, separator or \n-style escape
    r"(?:\\?(?P<q>[\"'`])(?P<qv>[^\"'`\r\n\\]{1,512}?)\\?(?P=q)"
    r"|(?P<uv>(?:[^\s\"'`,;&|<>(){}\[\]\\]|\\(?![nrt\"'\\])){1,512}))"
)


class _AssignmentRule(Rule):
    """``password=...``, ``"api_key": "..."``, ``token: ...``: the value,
    quoted or not, when it looks like a credential (detect-secrets' keyword
    patterns are written for source files and take the rest of the line)."""

    def __init__(self):
        super().__init__(_assignment_kind, KEYWORD, _ASSIGNMENT, group=_assignment_value, lower=True)


class _PemRule:
    """A private key block: from PrivateKeyDetector's BEGIN line to the END
    line; without one (a cut preview), the base64 lines that follow."""

    family = PEM | DASH
    _start = re.compile(r"(?:-{2,5} ?)?(?:" + _alt(PrivateKeyDetector.denylist) + r")[^\r\n\\]*")
    _end = re.compile(r"END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?[ -]*|Private-MAC: *[0-9A-Fa-f]*")
    _body = re.compile(r"(?:(?:\r?\n|\\r?\\n)(?:[\w-]+: [^\r\n\\]*|[A-Za-z0-9+/=]+))*")

    def apply(self, text: str, counts: Counter) -> str:
        out: list[str] = []
        pos = 0
        while True:
            m = self._start.search(text, pos)
            if m is None:
                break
            end_m = self._end.search(text, m.end(), m.end() + 65536)
            end = end_m.end() if end_m else self._body.match(text, m.end()).end()
            out.append(text[pos:m.start()])
            out.append(REDACTED.format("private_key"))
            counts["private_key"] += 1
            pos = end
        if not out:
            return text
        out.append(text[pos:])
        return "".join(out)


class _JwtRule:
    """JwtTokenDetector's pattern, taking the signature too, checked with its
    ``is_formally_valid`` (header and payload decode to JSON)."""

    family = JWT
    _pattern = re.compile(r"eyJ[A-Za-z0-9_=-]+\.[A-Za-z0-9_=-]+(?:\.[A-Za-z0-9_+/=-]*)?")
    assert JwtTokenDetector.denylist[0].pattern.startswith("eyJ")

    def apply(self, text: str, counts: Counter) -> str:
        def replace(m: re.Match) -> str:
            if not _jwt_valid(m.group()):
                return m.group()
            counts["jwt"] += 1
            return REDACTED.format("jwt")

        return self._pattern.sub(replace, text)


class _AwsRule:
    """AWSKeyDetector's access key id; a secret key (40 characters of mixed
    case) in the same text is redacted with it."""

    family = CAPS
    _id = re.compile(_BOUND + f"(?:{AWSKeyDetector.denylist[0].pattern})")
    _secret = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")

    near = 200  # characters at most between an access key id and its secret key

    def apply(self, text: str, counts: Counter) -> str:
        ids = [m.start() for m in self._id.finditer(text)]
        if not ids:
            return text
        counts["aws_access_key"] += len(ids)
        marker = REDACTED.format("aws_access_key")
        text = self._id.sub(marker, text)
        # where the ids are now (each shorter by 20 - len(marker) characters)
        shift = len(marker) - 20
        at = [pos + i * shift for i, pos in enumerate(ids)]

        def secret(m: re.Match) -> str:
            if not _aws_secret_shape(m.group()) or min(abs(m.start() - a) for a in at) > self.near:
                return m.group()
            counts["aws_secret_key"] += 1
            return REDACTED.format("aws_secret_key")

        return self._secret.sub(secret, text)


def _flag_kind(m: re.Match, text: str) -> str | None:
    """``--password VALUE``, ``--db-token VALUE``: the name must be a flag."""
    at = m.start()
    while at > 0 and (text[at - 1].isalnum() or text[at - 1] in "_-"):
        at -= 1
    if not text.startswith("-", at):
        return None
    return _keyword_kind(m.group(1))


_URL_CHARS = r"[^\s/?#@\"'<>]"
RULES: list = [
    _PemRule(),
    _JwtRule(),
    Rule("anthropic_key", DASH, r"(?<![\w-])sk-ant-[A-Za-z0-9_-]{20,}"),
    Rule("openai_key", DASH, _alt(OpenAIDetector.denylist)),
    Rule("openai_key", DASH, r"(?<![\w-])sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"),
    Rule("api_key", DASH, r"(?<![\w-])sk-[A-Za-z0-9_-]{20,}", check=_has_digit),  # DeepSeek, Qwen, OpenRouter...
    Rule("github_token", UNDER, _WORD_BOUND + f"(?:{_alt(GitHubTokenDetector.denylist)})"),
    Rule("github_token", UNDER, _WORD_BOUND + r"github_pat_[A-Za-z0-9_]{22,}"),
    Rule("gitlab_token", DASH | GITLAB_RUNNER, _alt(GitLabTokenDetector.denylist)),
    Rule("slack_webhook", COLON, SlackDetector.denylist[1]),
    Rule("slack_token", DASH, SlackDetector.denylist[0]),
    Rule("slack_token", DASH, r"xapp-\d+-[A-Za-z0-9]+-\d+-[A-Za-z0-9]+"),
    Rule("stripe_key", UNDER, _alt(StripeDetector.denylist)),
    Rule("npm_token", UNDER, _WORD_BOUND + r"npm_[A-Za-z0-9]{36}"),
    Rule("pypi_token", DASH, _alt(PypiTokenDetector.denylist)),
    Rule("sendgrid_key", DOT, _alt(SendGridDetector.denylist)),
    Rule("mailchimp_key", DASH, _alt(MailchimpDetector.denylist)),
    Rule("telegram_bot_token", COLON, _alt(TelegramBotTokenDetector.denylist)),
    Rule("discord_bot_token", DOT, _WORD_BOUND + f"(?:{_alt(DiscordBotTokenDetector.denylist)})"),
    Rule("google_api_key", CAPS, _BOUND + r"AIza[0-9A-Za-z_-]{35}"),
    _AwsRule(),
    Rule("url_password", COLON, BasicAuthDetector.denylist[0], group=1, check=_url_password),
    # ... also when the password holds sub-delimiters (!$&'()*+,;=) or the user is empty.
    Rule("url_password", COLON, rf"://[^\s/?#@\"'<>:\[\]]*:({_URL_CHARS}+)@", group=1, check=_url_password),
    Rule("aws_secret_key", KEYWORD, AWSKeyDetector.denylist[1], group=1, lower=True),
    Rule("authorization", KEYWORD,
         r"authorization(?<![a-z0-9_]authorization)[\"']?[ \t]*[:=][ \t]*[\"']?(?:(?:bearer|basic|token|bot|digest|apikey)[ \t]+)?"
         r"([a-z0-9._~+/:-]{8,}=*)", group=1, check=lambda v: looks_secret(v, quoted=True), lower=True),
    Rule("bearer_token", KEYWORD, r"bearer(?<![a-z0-9_]bearer)[ \t]+([a-z0-9._~+/-]{16,}=*)", group=1,
         check=lambda v: looks_secret(v, quoted=True), lower=True),
    Rule(_flag_kind, KEYWORD, r"(password|passwd|passphrase|token|secret|api-key|apikey|auth-key)[ \t]+"
         r"[\"']?([^\s\"'-][^\s\"']*)", group=2, check=looks_secret, lower=True),
    Rule("password", DASH, r"\bmysql(?:dump|admin|sh)?\b[^\n|;&]*?[ \t]-p([^\s\"'-][^\s\"']{2,})", group=1),
    _AssignmentRule(),
]


def redact_text(text: str, found: int | None = None, counts: Counter | None = None) -> tuple[str, Counter | None]:
    """``text`` with its credentials replaced; the count of each kind (None
    when the prefilter saw nothing)."""
    if found is None:
        found = triggers(text)
    if not found:
        return text, counts
    if counts is None:
        counts = Counter()
    low = None
    for rule in RULES:
        if rule.family & found:
            if getattr(rule, "lower", False):
                if low is None:
                    low = text.lower()
                new = rule.apply(text, counts, low)
            else:
                new = rule.apply(text, counts)
            if new is not text:
                text, low = new, None
    return text, counts


# -- JSON ---------------------------------------------------------------------

def _skip_value(obj: dict, key: str) -> bool:
    """Binary payloads: base64 images and opaque signatures."""
    if key in ("thinkingSignature", "textSignature", "signature", "encrypted_content"):
        return True
    return key == "data" and obj.get("type") == "image"


def _walk(value: Any, counts: Counter, name: str | None = None) -> Any:
    if isinstance(value, str):
        found = triggers(value)
        if found:
            value, _ = redact_text(value, found, counts)
        if name is not None and _name_is_secret(name) and looks_secret(value, quoted=True):
            kind = _keyword_kind(name)
            counts[kind] += 1
            return REDACTED.format(kind)
        return value
    if isinstance(value, list):
        return [_walk(v, counts) for v in value]
    if isinstance(value, dict):
        return {k: (v if _skip_value(value, k) else _walk(v, counts, k)) for k, v in value.items()}
    return value


def _loads(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)  # integers beyond 64 bits; raises ValueError if not JSON


def _dumps(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(value, ensure_ascii=False, allow_nan=True)


def redact_json_value(value: Any) -> tuple[Any, Counter]:
    counts: Counter = Counter()
    return _walk(value, counts), counts


def redact_json(text: str, force: bool = False) -> tuple[str, Counter | None, Any]:
    """A JSON text with the credentials in its strings replaced, re-encoded
    (still valid JSON); also the decoded, redacted value (None when nothing
    was found). Not JSON: redacted as text."""
    if not force and not maybe(text):
        return text, None, None
    try:
        value = _loads(text)
    except ValueError:
        new, counts = redact_text(text)
        return new, counts, None
    counts: Counter = Counter()
    new_value = _walk(value, counts)
    if not counts:
        return text, None, None
    return _dumps(new_value), counts, new_value


def total(counts: Counter | None) -> int:
    return sum(counts.values()) if counts else 0


# -- what the store holds (agentbase secrets) ------------------------------------

# (table, the row's label column, the columns where a credential is counted: "json" or "text")
SCAN_PLACES = (
    ("messages", "message_uuid", (("content_blocks", "json"), ("error_message", "text"), ("text_preview", "text"))),
    ("entries", "entry_uuid", (("raw_json", "json"),)),
    ("entry_revisions", "entry_uuid", (("raw_json", "json"), ("content_blocks", "json"))),
    ("sessions", "session_uuid", (("header_json", "json"), ("cwd", "text"))),
)
_SCAN_BATCH = 2000


def scan_store(store) -> dict:
    """Every credential the export would redact, found by reading the store:
    ``{"total", "kinds": {kind: count}, "places": [{server, agent, session,
    table, id, entry, column, kind, count}]}``. Values are never kept."""
    sessions = {r[0]: (r[1], r[2], r[3]) for r in store.query("SELECT id, server, agent_id, session_uuid FROM sessions")}
    places: list[dict] = []
    kinds: Counter = Counter()
    for table, label, columns in SCAN_PLACES:
        have = set(store.columns(table))
        cols = [c for c, _ in columns if c in have]
        sid = "id" if table == "sessions" else "session_id"
        select = (f"SELECT id, [{sid}], [{label}], {', '.join(f'[{c}]' for c in cols)} FROM [{table}] "
                  f"WHERE id > ? ORDER BY id LIMIT {_SCAN_BATCH}")
        how = dict(columns)
        last = 0
        while True:
            rows = store.query(select, (last,))
            if not rows:
                break
            last = rows[-1][0]
            for row in rows:
                values = dict(zip(cols, row[3:]))
                for column in cols:
                    value = values[column]
                    if value is None or (column == "text_preview" and values.get("content_blocks") is not None):
                        continue  # a preview is cut from the content, counted there
                    if not maybe(value):
                        continue
                    counts = (redact_json(value, force=True)[1] if how[column] == "json"
                              else redact_text(value)[1])
                    for kind, n in (counts or {}).items():
                        server, agent, session = sessions.get(row[1], (None, None, None))
                        kinds[kind] += n
                        places.append({"server": server, "agent": agent, "session": session, "table": table,
                                       "id": row[0], "entry": row[2], "column": column, "kind": kind, "count": n})
    return {"total": sum(kinds.values()), "kinds": dict(kinds.most_common()), "places": places}


def format_findings(found: dict) -> str:
    """The text report of :func:`scan_store`: kinds, then places."""
    if not found["total"]:
        return "no credentials found"
    lines = [f"{found['total']} credentials in {len(found['places'])} places (values not shown):", ""]
    width = max(len(k) for k in found["kinds"])
    lines.append(f"{'kind':<{width}}  count")
    lines += [f"{kind:<{width}}  {n:>5}" for kind, n in found["kinds"].items()]
    lines.append("")
    header = ("server", "agent", "session", "table.column", "id", "entry", "kind", "count")
    table = [header] + [
        (str(p["server"]), str(p["agent"]), str(p["session"]), f"{p['table']}.{p['column']}", str(p["id"]),
         str(p["entry"]), p["kind"], str(p["count"]))
        for p in found["places"]
    ]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in table]
    return "\n".join(lines)
