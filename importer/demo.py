"""The demo: a small made-up OpenClaw tree that ``agentbase import`` imports when nothing
else is configured, written by a deterministic synthetic transcript generator.

Writes trees shaped like real OpenClaw state folders::

    <root>/<server>/agents/<agent>/sessions/<session-uuid>.jsonl
    <root>/<server>/agents/<agent>/sessions/<session-uuid>-topic-<n>.jsonl
    <root>/<server>/agents/<agent>/sessions/<session-uuid>.jsonl.reset.<2026-04-24T16-09-14.281Z>
    <root>/<server>/agents/<agent>/sessions/sessions.json

Every line is an OpenClaw v3 entry (see FORMAT.md sections 2-8): a ``session`` header,
``model_change``, ``thinking_level_change``, a ``model-snapshot`` custom entry, then
user / assistant / toolResult messages, with occasional branches, compactions and model
switches. All text is made up here from small vocabularies; nothing comes from real data.

Everything is driven by one ``random.Random(seed)``, so the same call writes byte-identical
files. Only the standard library and orjson are used.

:func:`generate_demo` writes the demo (~2.5 MB). The generator's parts (:class:`Corpus`,
:class:`Plan`, :class:`Profile`, :class:`Session`, :class:`TreeWriter`) also build the
benchmark trees, which live with the benchmarks (``bench/trees.py``).
"""

from __future__ import annotations

import base64
import calendar
import math
import random
import re
import string
import time
import uuid
from pathlib import Path

import orjson

__all__ = ["generate_demo", "Corpus", "Plan", "Profile", "Session", "TreeWriter"]

KIB = 1024
MIB = 1024 * 1024

DEFAULT_SERVERS = ("macmini", "ubuntu1", "ubuntu2")
DEFAULT_AGENTS = ("main", "xingyao", "xinghui", "xingjiang", "opencode", "sisyphus")

HOME = "/home/shenwei"
CWD = "/home/shenwei/work"
STATE_DIR = HOME + "/.openclaw"  # used for sessionFile paths in sessions.json

# Fixed reference date: every timestamp is derived from it, never from the clock.
END_MS = calendar.timegm((2026, 11, 28, 0, 0, 0)) * 1000
DAY_MS = 86_400_000

# USD per million tokens: (input, output, cacheRead, cacheWrite).
_MODELS = {
    "anthropic": [
        ("claude-sonnet-4-5", (3.0, 15.0, 0.30, 3.75)),
        ("claude-opus-4-5", (5.0, 25.0, 0.50, 6.25)),
        ("claude-haiku-4-5", (1.0, 5.0, 0.10, 1.25)),
    ],
    "minimax": [
        ("MiniMax-M2.5", (0.30, 1.20, 0.03, 0.375)),
        ("MiniMax-M2.5-highspeed", (0.60, 2.40, 0.06, 0.375)),
    ],
}

_ALNUM = string.ascii_letters + string.digits
_LOWER_ALNUM = string.ascii_lowercase + string.digits


# --------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------


def _iso(ms: int) -> str:
    """Epoch milliseconds -> '2026-11-21T08:15:02.123Z'."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".%03dZ" % (ms % 1000)


def _name_ts(ms: int) -> str:
    """Timestamp as used in rename suffixes: '2026-04-24T16-09-14.281Z'."""
    return _iso(ms).replace(":", "-")


def _uuid4(rnd: random.Random) -> str:
    return str(uuid.UUID(int=rnd.getrandbits(128), version=4))


def _hex(rnd: random.Random, n: int) -> str:
    return "%0*x" % (n, rnd.getrandbits(4 * n))


def _fill(template: str, slots: dict) -> str:
    """Replace {name} slots; unlike str.format it leaves other braces alone."""
    return re.sub(r"\{(\w+)\}", lambda m: str(slots[m.group(1)]) if m.group(1) in slots else m.group(0), template)


def _repeat_to(rnd: random.Random, pool: list, avg: float, chars: int, sep: str = "\n") -> str:
    """Join random pool items until about `chars` characters (fast: one rnd.choices call)."""
    if chars <= 0:
        return ""
    k = max(1, int(chars / (avg + len(sep))) + 1)
    text = sep.join(rnd.choices(pool, k=k))
    if len(text) > chars:
        cut = text.rfind(sep, 0, chars)
        text = text[: cut if cut > chars // 2 else chars]
    return text


# --------------------------------------------------------------------------------------
# vocabulary (all invented for this generator)
# --------------------------------------------------------------------------------------

_HOSTS = ("macmini", "ubuntu1", "ubuntu2", "build-01", "db-primary", "edge-gw", "nas")
_SERVICES = ("nginx", "postgres", "redis", "agentd", "api-gateway", "worker-queue", "grafana",
             "openclaw-gateway", "minio", "caddy", "scheduler", "search-indexer")
_DBS = ("orders", "users", "billing", "metrics", "inventory", "audit_log", "reports")
_PATHS = ("/tmp/build", "/var/log/agentd", "/srv/releases", "/home/shenwei/work/agentbase/dist",
          "/opt/app/cache", "/data/backups", "/var/lib/docker/volumes", "/home/shenwei/work/site/public")
_MODULES = ("store", "parser", "pipeline", "config", "http_client", "scheduler", "models", "cache",
            "auth", "metrics", "report", "sync")
_DOMAINS = ("api.example.com", "status.example.org", "git.internal.lan", "docs.example.net")
_SIZES = ("120 MB", "1.4 GB", "380 MB", "2.7 GB", "56 MB", "9.1 GB")
_WORDS = ("cache", "queue", "index", "report", "backup", "session", "token", "upload", "invoice",
          "webhook", "metric", "job", "tenant", "schema", "snapshot", "release")

_EN_USER = [
    "Can you check why {svc} on {host} keeps restarting after the last deploy?",
    "The {db} database migration finished, but the row count looks off by about {n}.",
    "Please clean up the old build artifacts under {path} before we ship the next release.",
    "I pushed a fix for the timeout in the {svc} client, tell me if the tests still fail.",
    "Disk usage on {host} jumped to {pct}% overnight, probably log rotation again.",
    "Let's roll back {svc} to the previous tag and compare the latency graphs.",
    "Summarize what changed in the repository since yesterday and flag anything risky.",
    "The cron job that backs up the {db} database did not run on {host} last night.",
    "Write a small shell script that tails the {svc} log and warns when errors spike.",
    "I think the connection pool is too small, we see {n} waiting clients at peak.",
    "Run the test suite again with verbose output and show me only the failures.",
    "The nginx config on {host} still points at the old upstream port {port}.",
    "Could you draft release notes for version {ver} in both English and Chinese?",
    "Check whether the certificate for {domain} expires within the next {days} days.",
    "Move the staging data into its own schema so the reports stop mixing them up.",
    "Why is the {word} endpoint returning 502 only for large uploads?",
    "Please deploy the {ver} build to the server and watch the error rate for ten minutes.",
    "Can you compare the memory usage of {svc} before and after the upgrade?",
    "Find out which process is holding port {port} on {host}.",
    "Add a retry with backoff around the {word} upload, three attempts is enough.",
]

_EN_ASSISTANT = [
    "I checked the service on {host}: {svc} is running, but it restarted {n} times in the last hour.",
    "The failure comes from a missing environment variable, so I added it to the unit file and reloaded systemd.",
    "Most errors in the log are connection resets coming from the {db} database.",
    "I removed the stale files under {path} and freed about {size} of disk space.",
    "The tests pass now, except one flaky case that depends on the wall clock.",
    "Next I will verify the migration by comparing row counts in the old and new tables.",
    "The deploy to {host} succeeded and the health check returns 200 again.",
    "I could not reach {host} over SSH, the connection timed out after {sec} seconds.",
    "The {word} job was stuck behind a lock held by an old worker, which I stopped.",
    "Memory use of {svc} is stable at around {size} after the change.",
    "I updated the configuration and kept a backup of the previous file next to it.",
    "The certificate for {domain} is valid for another {days} days, no action needed yet.",
    "There are {n} rows in the {db} table that still reference the removed {word} ids.",
    "I opened a branch with the fix and left the migration for you to review first.",
    "Port {port} is held by an orphaned {svc} process started by the old deploy script.",
    "Rolling back to {ver} brought the p95 latency down to {n} ms.",
    "The build is green; the only warning is an unused import in the {mod} module.",
    "I added the retry logic with exponential backoff and a short jitter.",
]

_EN_THINK = [
    "The user wants me to look at {svc} on {host}, so I should start with the service status.",
    "Let me check the logs before changing anything, the restart loop may have a simple cause.",
    "I should first confirm which version is deployed, then compare it with the tag in git.",
    "The exit code suggests the command failed, maybe the path does not exist on this machine.",
    "It would be safer to make a backup of the {db} database before running the migration.",
    "I need to keep the answer short and list the concrete steps I took.",
    "The output is long, I will only look at the lines that mention errors.",
    "Maybe the disk is full, which would explain why {svc} cannot write its pid file.",
    "I should not delete anything outside {path} without asking first.",
    "The test failure looks unrelated to the change, it depends on the time zone.",
    "Let me read the {mod} module to see how the retries are configured.",
    "The user writes in Chinese, so I will answer in Chinese as well.",
]

_ZH_USER = [
    "帮我看一下{host}上的{svc}为什么一直重启，昨天部署之后就不稳定了。",
    "{db}数据库的迁移已经跑完了，但是数据行数好像少了大约{n}条。",
    "请把{path}下面的旧构建产物清理掉，然后重新部署到服务器上。",
    "服务器{host}的磁盘使用率已经到了{pct}%，是不是日志没有轮转？",
    "先把{svc}回滚到上一个版本，再对比一下延迟的监控曲线。",
    "今晚需要把数据库备份到另一台服务器，记得检查备份文件的大小。",
    "部署脚本里有一个路径写错了，导致{svc}找不到配置文件，帮我修一下。",
    "数据库连接池是不是太小了？高峰期有{n}个请求在排队。",
    "请用中文和英文各写一段{ver}版本的发布说明。",
    "这个改动需要先在测试环境验证，再部署到生产服务器。",
    "帮我查一下{domain}的证书还有多少天过期。",
    "{host}上哪个进程占用了{port}端口？",
    "把{word}上传的逻辑加上重试，最多三次就可以了。",
    "看看{svc}升级前后的内存占用有没有明显变化。",
    "报表里测试数据和正式数据混在一起了，能不能分到不同的数据库里？",
    "服务器上的定时任务昨晚没有执行，帮我查一下原因。",
]

_ZH_ASSISTANT = [
    "我已经在{host}上重启了{svc}，健康检查现在返回正常。",
    "我检查了日志，大部分错误来自{db}数据库的连接被重置。",
    "已经把{path}目录清理干净，释放了大约{size}的空间。",
    "{host}的SSH连接超时了，可能是安全组的规则被修改了。",
    "测试全部通过了，只有一个用例因为时区问题偶尔失败。",
    "部署完成后我确认了服务器上的防火墙规则没有被覆盖。",
    "迁移前我先做了一次数据库备份，备份文件放在{path}下面。",
    "{svc}的配置里缺少一个环境变量，我已经补上并重新加载了服务。",
    "{port}端口被一个旧的{svc}进程占用，是之前的部署脚本留下的。",
    "回滚到{ver}之后，p95延迟降到了{n}毫秒左右。",
    "{db}数据库里还有{n}行数据引用了已经删除的记录，需要你确认怎么处理。",
    "重试逻辑已经加好了，使用指数退避，并加了一点随机抖动。",
    "构建成功了，只有{mod}模块里有一个未使用的导入的警告。",
    "证书还有{days}天过期，暂时不需要处理。",
    "我在服务器上新建了一个分支，迁移脚本等你审核之后再执行。",
]

_ZH_THINK = [
    "用户想让我检查{host}上的{svc}，先看一下服务状态。",
    "在修改之前最好先备份数据库，避免迁移出错。",
    "命令的退出码不是零，可能是路径在这台服务器上不存在。",
    "输出太长了，只看包含错误的那几行就够了。",
    "部署之前要确认{ver}的构建产物已经上传到服务器。",
    "也许是磁盘满了，所以{svc}写不了日志。",
]

_LOG_MSGS = [
    "request completed method=GET path=/api/v1/{word}s status=200 duration_ms={n}",
    "request completed method=POST path=/api/v1/{word}s status=201 duration_ms={n}",
    "connection to {db} reset by peer, retrying in {n}ms",
    "worker {n} picked up job id={hex} queue={word}",
    "cache miss key=session:{hex}",
    "slow query took {n}ms: SELECT id, status FROM {db}.{word}s WHERE updated_at > $1",
    "health check ok upstream={host}:{port}",
    "gc pause {n}ms heap_mb={pct}",
    "upstream timed out (110: Connection timed out) while reading response header from upstream",
    "failed to write pid file: No space left on device",
    "部署任务 {hex} 已完成，耗时 {n}ms",
    "数据库连接池已满，等待中的请求数 {n}",
    "scheduled backup of {db} started target=/data/backups/{db}-{hex}.sql.gz",
    "certificate for {domain} expires in {days} days",
]

_CODE_SNIPPETS = [
    'def {fn}(self, {arg}):\n    """Return the {word} for {arg}, or None."""\n    if not {arg}:\n        return None\n'
    '    result = self._client.get(f"/{word}s/{{{arg}}}", timeout={n})\n'
    '    logger.debug("{fn} -> %s", result)\n    return result\n',
    "class {cls}:\n    def __init__(self, path, retries={d}):\n        self.path = path\n"
    "        self.retries = retries\n        self._cache = {{}}\n\n    def load(self):\n"
    "        with open(self.path, 'rb') as fh:\n            return fh.read()\n",
    "export async function {fn}({arg}: string): Promise<{cls}> {{\n"
    "  const res = await fetch(`/api/{word}s/${{{arg}}}`);\n"
    "  if (!res.ok) throw new Error(`{word} lookup failed: ${{res.status}}`);\n"
    "  return (await res.json()) as {cls};\n}}\n",
    "{word}:\n  enabled: true\n  host: {host}\n  port: {port}\n  pool_size: {d}\n  timeout_ms: {n}\n",
    "for attempt in range({d}):\n    try:\n        return {fn}({arg})\n    except ConnectionError:\n"
    "        time.sleep(2 ** attempt)\nraise RuntimeError('{word} failed after retries')\n",
    "CREATE TABLE IF NOT EXISTS {word}s (\n    id INTEGER PRIMARY KEY,\n    {arg} TEXT NOT NULL,\n"
    "    created_at INTEGER NOT NULL\n);\nCREATE INDEX IF NOT EXISTS idx_{word}s_{arg} ON {word}s({arg});\n",
]

# exec commands: (template, output kind). Kinds marked scalable in _KINDS can grow large.
_EXEC_COMMANDS = [
    ("git status", "git_status"),
    ("git log --oneline -n 30", "git_log"),
    ("git diff --stat HEAD~3", "git_diff"),
    ("cd {cwd}/agentbase && git pull --rebase", "git_pull"),
    ("ls -la /var/log", "ls"),
    ("ls -la {path}", "ls"),
    ("rm -rf /tmp/build", "empty"),
    ("rm -rf {path}/*.tmp && mkdir -p /tmp/build", "empty"),
    ("mkdir -p /tmp/build && tar -xzf /srv/releases/app-{ver}.tar.gz -C /tmp/build", "empty"),
    ("df -h", "df"),
    ("du -sh /var/lib/docker /var/log /srv/releases", "du"),
    ("docker ps -a", "docker"),
    ("systemctl status {svc} --no-pager", "systemctl"),
    ("sudo systemctl restart {svc} && sleep 2 && systemctl is-active {svc}", "active"),
    ("curl -sS http://localhost:{port}/healthz", "curl"),
    ("tail -n 2000 /var/log/{svc}/error.log", "log"),
    ("journalctl -u {svc} --since '2 hours ago' --no-pager", "log"),
    ("grep -rn 'ERROR' /var/log/{svc}/ | tail -n 5000", "log"),
    ("npm run build", "build"),
    ("python -m pytest -q tests/", "test"),
    ("cat src/{mod}.py", "code"),
    ("psql -h localhost -U app -d {db} -c 'SELECT status, count(*) FROM jobs GROUP BY status'", "psql"),
    ("pip install -r requirements.txt", "pip"),
    ("kubectl get pods -n prod -o wide", "kubectl"),
    ("ssh {host} 'uptime && free -m'", "uptime"),
    ("find . -name '*.py' -newer setup.cfg", "find"),
    ("pg_dump -h localhost -U app {db} | gzip > /data/backups/{db}.sql.gz", "empty"),
    ("crontab -l", "crontab"),
    ("ps aux --sort=-%mem | head -n 15", "ps"),
]

# Failure modes per kind: (exit code, output). A "" output means the command printed nothing.
_FAILURES = {
    "git_status": [(128, "fatal: not a git repository (or any of the parent directories): .git")],
    "git_log": [(128, "fatal: your current branch 'main' does not have any commits yet")],
    "git_diff": [(128, "fatal: ambiguous argument 'HEAD~3': unknown revision or path not in the working tree.")],
    "git_pull": [(1, "error: cannot pull with rebase: You have unstaged changes.\n"
                     "error: please commit or stash them.")],
    "ls": [(2, "ls: cannot access '{path}': No such file or directory")],
    "empty": [(1, "rm: cannot remove '/tmp/build/.nfs0000000000{d}': Device or resource busy"),
              (1, "tar: /srv/releases/app-{ver}.tar.gz: Cannot open: No such file or directory")],
    "df": [(1, "df: /mnt/backup: Transport endpoint is not connected")],
    "du": [(1, "du: cannot read directory '/var/lib/docker/overlay2': Permission denied")],
    "docker": [(1, "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
                   "Is the docker daemon running?")],
    "systemctl": [(3, "x {svc}.service - {svc} daemon\n     Active: failed (Result: exit-code)"),
                  (4, "Unit {svc}.service could not be found.")],
    "active": [(1, "Job for {svc}.service failed because the control process exited with error code.")],
    "curl": [(7, "curl: (7) Failed to connect to localhost port {port} after 0 ms: Connection refused")],
    "log": [(1, ""), (1, "tail: cannot open '/var/log/{svc}/error.log' for reading: No such file or directory")],
    "build": [(1, "npm ERR! code ELIFECYCLE\nnpm ERR! errno 2\nnpm ERR! app@{ver} build: `vite build`\n"
                  "npm ERR! Exit status 2")],
    "test": [(1, "FAILED tests/test_{mod}.py::test_{word}_roundtrip - AssertionError: assert {n} == {d}\n"
                 "1 failed, {n} passed in 4.21s")],
    "code": [(1, "cat: src/{mod}.py: No such file or directory")],
    "psql": [(2, 'psql: error: connection to server at "localhost" (127.0.0.1), port 5432 failed: Connection refused')],
    "pip": [(1, "ERROR: Could not find a version that satisfies the requirement {word}-client==9.9.9")],
    "kubectl": [(127, "bash: kubectl: command not found")],
    "uptime": [(255, "ssh: connect to host {host} port 22: Connection timed out")],
    "find": [(1, "find: 'setup.cfg': No such file or directory")],
    "crontab": [(1, "no crontab for shenwei")],
    "ps": [(1, "ps: error: unsupported option (BSD syntax)")],
}


class Corpus:
    """Pools of ready-made sentences, lines and commands, built once from the generator's RNG.

    Per-message work is then only random picks and joins, which keeps 500 MB well under a minute.
    """

    def __init__(self, rnd: random.Random):
        self.rnd = rnd
        self.en_user = self._expand(_EN_USER, 12)
        self.en_assistant = self._expand(_EN_ASSISTANT, 12)
        self.en_think = self._expand(_EN_THINK, 12)
        self.zh_user = self._expand(_ZH_USER, 12)
        self.zh_assistant = self._expand(_ZH_ASSISTANT, 12)
        self.zh_think = self._expand(_ZH_THINK, 12)
        self.log = [
            "%s %s [%s] %s" % (
                _iso(END_MS - rnd.randrange(60 * DAY_MS)),
                rnd.choice(("INFO", "INFO", "INFO", "WARN", "ERROR", "DEBUG")),
                rnd.choice(_SERVICES), _fill(rnd.choice(_LOG_MSGS), self._slots()))
            for _ in range(3000)
        ]
        self.code = self._expand(_CODE_SNIPPETS, 80)
        # (command, output kind, slots): the slots also fill that command's output and failure text
        self.commands = []
        for template, kind in _EXEC_COMMANDS:
            for _ in range(8):
                slots = self._slots()
                self.commands.append((_fill(template, slots), kind, slots))
        self.scalable_commands = [c for c in self.commands if _KINDS[c[1]][3]]
        self.kind_lines = {kind: self._expand(spec[1], 20) for kind, spec in _KINDS.items()}
        # md_lines: the body of web pages returned by web_fetch
        self.md_lines = (["## " + s.rstrip(".?") for s in self.en_assistant[:60]]
                         + self.en_assistant + self.en_user + ["- " + s for s in self.en_assistant[:100]])
        self.avg = {name: sum(map(len, pool)) / len(pool) for name, pool in (
            ("log", self.log), ("code", self.code), ("md", self.md_lines),
            ("en_assistant", self.en_assistant), ("zh_assistant", self.zh_assistant),
            ("en_think", self.en_think), ("zh_think", self.zh_think),
            ("en_user", self.en_user), ("zh_user", self.zh_user))}
        self.kind_avg = {k: (sum(map(len, v)) / len(v) if v else 1.0) for k, v in self.kind_lines.items()}

    def _slots(self) -> dict:
        r = self.rnd
        return {
            "host": r.choice(_HOSTS), "svc": r.choice(_SERVICES), "db": r.choice(_DBS), "path": r.choice(_PATHS),
            "mod": r.choice(_MODULES), "domain": r.choice(_DOMAINS), "size": r.choice(_SIZES),
            "word": r.choice(_WORDS), "n": r.randint(2, 4000), "n2": r.randint(1_000, 400_000),
            "d": r.randint(1, 9), "d2": r.randint(0, 9), "pct": r.randint(61, 99),
            "port": r.choice((80, 443, 3000, 5432, 6379, 8080, 8443, 9000, 18789)),
            "ver": "v%d.%d.%d" % (r.randint(0, 3), r.randint(0, 30), r.randint(0, 15)),
            "days": r.randint(3, 90), "sec": r.choice((10, 30, 60, 120)), "hex": _hex(r, 8), "hex7": _hex(r, 7),
            "fn": r.choice(("load_", "fetch_", "sync_", "parse_", "save_")) + r.choice(_WORDS),
            "arg": r.choice(("key", "name", "item_id", "path", "tenant")),
            "cls": r.choice(_WORDS).capitalize() + r.choice(("Store", "Client", "Record", "Config")),
            "cwd": CWD,
        }

    def _expand(self, templates, per_template: int) -> list:
        return [_fill(t, self._slots()) for t in templates for _ in range(per_template)]

    # -- text -------------------------------------------------------------------------

    def prose(self, kind: str, lang: str, chars: int) -> str:
        """About `chars` characters of sentences; paragraphs of 2-5 sentences."""
        rnd = self.rnd
        pool = getattr(self, "%s_%s" % (lang, kind))
        sep = "" if lang == "zh" else " "
        k = max(1, int(chars / (self.avg.get("%s_%s" % (lang, kind), 40) + 1)) + 1)
        # without replacement while the pool allows, so a paragraph rarely repeats a sentence
        sents = rnd.sample(pool, k) if k <= len(pool) else rnd.choices(pool, k=k)
        paras, i = [], 0
        while i < len(sents):
            n = rnd.randint(2, 5)
            paras.append(sep.join(sents[i:i + n]))
            i += n
        return "\n\n".join(paras)

    def user_text(self, lang: str) -> str:
        rnd = self.rnd
        pool = self.zh_user if lang == "zh" else self.en_user
        k = rnd.choice((1, 1, 1, 2, 2, 3))
        text = ("" if lang == "zh" else " ").join(rnd.choices(pool, k=k))
        if rnd.random() < 0.1:  # mixed language message
            other = self.en_user if lang == "zh" else self.zh_user
            text += "\n" + rnd.choice(other)
        return text

    def answer(self, lang: str, chars: int, extras: bool = True) -> str:
        rnd = self.rnd
        text = self.prose("assistant", lang, chars)
        r = rnd.random() if extras else 1.0
        if r < 0.3:
            pool = self.zh_assistant if lang == "zh" else self.en_assistant
            text += "\n\n" + "\n".join("- " + s for s in rnd.choices(pool, k=rnd.randint(3, 6)))
        elif r < 0.5:
            text += "\n\n```bash\n%s\n```" % rnd.choice(self.commands)[0]
        return text

    def tool_output(self, kind: str, chars: int | None, slots: dict | None = None) -> str:
        """Output of an exec command of `kind`; scalable kinds grow to about `chars`.
        The body lines are pre-filled pool lines; only the short header/footer get `slots`."""
        rnd = self.rnd
        header, _, (lo, hi), scalable, footer = _KINDS[kind]
        if "{" in header or "{" in footer:
            slots = slots or self._slots()
            header, footer = _fill(header, slots), _fill(footer, slots)
        if kind == "log":
            body = _repeat_to(rnd, self.log, self.avg["log"], chars or rnd.randint(200, 3000))
        elif kind == "code":
            body = _repeat_to(rnd, self.code, self.avg["code"], chars or rnd.randint(300, 4000))
        elif scalable and chars:
            body = _repeat_to(rnd, self.kind_lines[kind], self.kind_avg[kind], chars)
        else:
            pool = self.kind_lines[kind]
            body = "\n".join(rnd.choices(pool, k=rnd.randint(lo, hi))) if pool else ""
        return header + body + footer


# kind -> (header, line templates, (min lines, max lines), scalable, footer)
_KINDS = {
    "git_status": ("On branch main\nYour branch is up to date with 'origin/main'.\n\nChanges not staged for commit:\n"
                   "  (use \"git add <file>...\" to update what will be committed)\n",
                   ["\tmodified:   src/{mod}.py", "\tmodified:   tests/test_{mod}.py", "\tdeleted:    docs/{word}.md",
                    "\tmodified:   config/{word}.yaml"], (1, 6), False,
                   "\n\nno changes added to commit (use \"git add\" and/or \"git commit -a\")"),
    "git_log": ("", ["{hex7} fix({mod}): handle empty {word} list", "{hex7} feat: add {word} export",
                     "{hex7} chore: bump {svc} to {ver}", "{hex7} refactor({mod}): split {fn}",
                     "{hex7} 修复{word}上传超时的问题", "{hex7} docs: 更新部署说明"], (5, 30), False, ""),
    "git_diff": ("", [" src/{mod}.py | {d}{d} ++++--", " tests/test_{mod}.py | {d} ++-", " README.md | {d} +"],
                 (2, 9), False, "\n {d} files changed, {n} insertions(+), {d}{d} deletions(-)"),
    "git_pull": ("", ["Updating {hex7}..{hex7}", "Fast-forward", " src/{mod}.py | {d} ++-",
                      "Successfully rebased and updated refs/heads/main."], (2, 5), False, ""),
    "ls": ("total {n}\n", ["-rw-r--r--  1 shenwei shenwei {n} Nov {d}{d} 0{d}:1{d} {word}.log",
                           "drwxr-xr-x  {d} shenwei shenwei 4096 Nov {d}{d} 1{d}:0{d} {word}",
                           "-rw-r-----  1 root    adm     {n}{d} Nov {d} 0{d}:3{d} syslog.{d}.gz"], (4, 30), False, ""),
    "empty": ("", [], (0, 0), False, ""),
    "df": ("Filesystem      Size  Used Avail Use% Mounted on\n",
           ["/dev/nvme0n1p2  468G  {n}G  {d}{d}G  {pct}% /", "tmpfs           3.1G  {d}.{d}M  3.1G   1% /run",
            "/dev/sda1       1.8T  {n}G  {d}{d}{d}G  {pct}% /data"], (3, 7), False, ""),
    "du": ("", ["{d}.{d}G\t/var/lib/docker", "{n}M\t/var/log", "{d}{d}G\t/srv/releases"], (3, 3), False, ""),
    "docker": ("CONTAINER ID   IMAGE                 STATUS                   NAMES\n",
               ["{hex}{hex7}   {svc}:{ver}   Up {d} days (healthy)   {svc}-{d}",
                "{hex}{hex7}   {svc}:latest   Exited (137) {d} hours ago   {svc}-old"], (2, 10), False, ""),
    "systemctl": ("", ["* {svc}.service - {svc} daemon",
                       "     Loaded: loaded (/etc/systemd/system/{svc}.service; enabled)",
                       "     Active: active (running) since Fri 2026-11-2{d} 0{d}:1{d}:0{d} UTC; {d}h ago",
                       "   Main PID: {n} ({svc})", "      Tasks: {d}{d} (limit: 38287)", "     Memory: {n}.{d}M"],
                  (4, 8), False, ""),
    "active": ("", ["active"], (1, 1), False, ""),
    "curl": ("", ['{"status":"ok","uptime_s":{n},"version":"{ver}"}', '{"status":"degraded","db":"{db}","lag_ms":{n}}'],
             (1, 1), False, ""),
    "log": ("", [], (5, 50), True, ""),
    "build": ("> app@{ver} build\n> vite build\n\n",
              ["dist/assets/{word}-{hex}.js   {n}.{d}{d} kB | gzip: {d}{d}.{d} kB", "transforming ({n}) src/{mod}.ts",
               "rendering chunks ({d}{d})...", "(!) Some chunks are larger than 500 kB after minification."],
              (5, 40), True, "\nbuilt in {d}.{d}{d}s"),
    "test": ("============================= test session starts ==============================\n",
             ["tests/test_{mod}.py ........{d}....                                   [ {d}{d}%]",
              "tests/test_{word}.py::test_{fn} PASSED", "tests/test_{word}.py::test_{fn} SKIPPED (needs {svc})"],
             (5, 40), True, "\n" + "=" * 25 + " {n} passed, {d} skipped in {d}.{d}{d}s " + "=" * 25),
    "code": ("", [], (10, 80), True, ""),
    "psql": (" status   | count\n----------+-------\n", [" done     | {n}", " failed   | {d}{d}", " queued   | {d}",
                                                         " running  | {d}"], (2, 4), False, "\n(4 rows)"),
    "pip": ("", ["Requirement already satisfied: {word}-client>={d}.{d} in ./venv/lib/python3.11/site-packages ({ver})",
                 "Collecting {word}lib=={d}.{d}.{d}", "  Downloading {word}lib-{d}.{d}.{d}-py3-none-any.whl ({n} kB)"],
            (3, 30), True, "\nSuccessfully installed {word}lib-{d}.{d}.{d}"),
    "kubectl": ("NAME                          READY   STATUS    RESTARTS   AGE   IP\n",
                ["{svc}-{hex}-{hex7}   1/1     Running   {d}          {d}d    10.42.{d}.{n}",
                 "{svc}-{hex}-{hex7}   0/1     CrashLoopBackOff   {d}{d}   {d}h    10.42.{d}.{n}"], (3, 12), False, ""),
    "uptime": ("", [" 1{d}:0{d}:2{d} up {d}{d} days,  {d}:{d}{d},  2 users,  "
                    "load average: 0.{d}{d}, 0.{d}{d}, 0.{d}{d}",
                    "               total        used        free      shared  buff/cache   available",
                    "Mem:           {n2}        {n}        {n}         {d}{d}        {n}        {n}"],
               (3, 3), False, ""),
    "find": ("", ["./src/{mod}.py", "./tests/test_{mod}.py", "./scripts/{word}_{fn}.py", "./src/{word}/{mod}.py"],
             (3, 40), True, ""),
    "crontab": ("# m h  dom mon dow   command\n",
                ["{d} 3 * * * /usr/local/bin/backup-{db}.sh >> /var/log/backup.log 2>&1",
                                                  "*/{d} * * * * /usr/bin/curl -fsS http://localhost:{port}/healthz"],
                (1, 5), False, ""),
    "ps": ("USER         PID %CPU %MEM    VSZ   RSS TTY      STAT START   TIME COMMAND\n",
           ["shenwei    {n}  {d}.{d2}  {d2}.{d} {n2} {n} ?        Ssl  Nov2{d2}  {d}:{d2}{d} {svc}"],
           (5, 15), False, ""),
}


# --------------------------------------------------------------------------------------
# one session
# --------------------------------------------------------------------------------------


class Profile:
    """Size knobs for one kind of tree (benchmark, big file, demo, tiny)."""

    def __init__(self, *, image_p=0.05, image_b64=(20_000, 150_000), big_p=0.02, big_cap=430_000,
                 mid_p=0.08, small_cap=6_000, max_steps=8, answer=(150, 2500), think=(80, 1200),
                 sig_bytes=(180, 700), turn_gap_ms=(20_000, 1_800_000), max_turns=10_000, think_p=0.7,
                 prefix=True, parallel_p=0.12, extras=True, note=(40, 300)):
        self.image_p = image_p            # chance a user message carries an image
        self.image_b64 = image_b64        # base64 length range of an image
        self.big_p = big_p                # chance a tool result is big (60 KB .. big_cap)
        self.big_cap = big_cap            # max chars of one tool result line (exec stores output twice: half)
        self.mid_p = mid_p                # chance a tool result is medium (4-40 KB)
        self.small_cap = small_cap        # cap of ordinary tool results
        self.max_steps = max_steps        # max tool-use rounds per user turn
        self.answer = answer              # final answer length range (chars)
        self.think = think                # thinking block length range (chars)
        self.sig_bytes = sig_bytes        # raw bytes behind an anthropic thinkingSignature
        self.turn_gap_ms = turn_gap_ms    # pause between user turns
        self.max_turns = max_turns        # stop after this many user turns even if under target size
        self.think_p = think_p            # chance of a thinking block per assistant message (thinking sessions)
        self.prefix = prefix              # channel header line on user messages from chat channels
        self.parallel_p = parallel_p      # chance an assistant message makes two tool calls at once
        self.extras = extras              # answers may end with a bullet list or a code block
        self.note = note                  # length range of text next to tool calls ("Let me check...")


PROFILE_DEMO = Profile(image_p=0.04, image_b64=(20_000, 40_000), big_p=0.01, big_cap=80_000, answer=(120, 1500),
                         turn_gap_ms=(15_000, 900_000))
# (channel, chatType, weight)
_CHANNELS = [("webchat", "direct", 4), ("feishu", "direct", 4), ("feishu", "group", 2), ("telegram", "direct", 2),
             ("telegram", "group", 1), ("discord", "channel", 1)]
_CHANNEL_NAMES = {"webchat": "WebChat", "feishu": "Feishu", "telegram": "Telegram", "discord": "Discord"}


class Plan:
    """What a session will look like, decided before any line is written."""

    def __init__(self, rnd: random.Random, agent: str, start_ms: int, target: int, profile: Profile):
        self.session_id = _uuid4(rnd)
        self.agent = agent
        self.start_ms = start_ms
        self.target = target
        self.profile = profile
        self.provider = "anthropic" if rnd.random() < 0.55 else "minimax"
        self.model, self.price = rnd.choice(_MODELS[self.provider])
        self.thinking = rnd.random() < 0.6
        self.thinking_level = rnd.choice(("low", "medium", "high")) if self.thinking else "off"
        self.lang = "zh" if rnd.random() < 0.55 else "en"
        (self.channel, self.chat_type), = rnd.choices([(c, t) for c, t, _ in _CHANNELS],
                                                      weights=[w for *_, w in _CHANNELS])
        self.spawned_by = "agent:main:main" if agent != "main" and rnd.random() < 0.25 else None
        if self.spawned_by:
            self.channel, self.chat_type = "internal", "direct"
        self.sender = "ou_" + _hex(rnd, 16)
        # branch / compaction: about 1 session in 20 each; *_p is the chance per turn boundary
        self.branch_p = 0.35 if rnd.random() < 1 / 20 else 0.0
        self.compaction_p = 0.3 if rnd.random() < 1 / 20 else 0.0
        self.switch_p = 0.05 if rnd.random() < 0.1 else 0.0  # mid-session model change
        self.force_fail = False   # demo: make sure the first exec exits non-zero
        self.force_image = False  # demo: make sure the first user message has an image
        self.min_turns = 1        # demo: enough turns for a forced branch and compaction


class Session:
    """Builds the lines of one transcript file in memory."""

    def __init__(self, corpus: Corpus, plan: Plan):
        self.c = corpus
        self.rnd = corpus.rnd
        self.p = plan
        self.prof = plan.profile
        self.provider, self.model, self.price = plan.provider, plan.model, plan.price
        self.lines: list[bytes] = []
        self.size = 0
        self.max_line = 0
        self.ids: set[str] = set()
        self.last: str | None = None       # current leaf id
        self.now = plan.start_ms           # clock in epoch ms
        self.ctx = self.rnd.randint(8_000, 20_000)  # context tokens (system prompt to start with)
        self.pending = 0                   # tokens added since the last assistant call
        self.turns: list[tuple[str, str]] = []  # active path: (user entry id, its parentId)
        self.call_no = 0
        self.stats = dict(messages=0, entries=0, images=0, tool_calls=0, branches=0, compactions=0,
                          nonzero_exits=0, tool_errors=0, thinking=0)
        self._header()

    # -- low level --------------------------------------------------------------------

    def _emit(self, obj: dict) -> int:
        line = orjson.dumps(obj) + b"\n"
        self.lines.append(line)
        n = len(line)
        self.size += n
        if n > self.max_line:
            self.max_line = n
        return n

    def _new_id(self) -> str:
        while True:
            eid = "%08x" % self.rnd.getrandbits(32)
            if eid not in self.ids:
                self.ids.add(eid)
                return eid

    def _entry(self, etype: str, fields: dict) -> tuple[str, int]:
        eid = self._new_id()
        obj = {"type": etype, "id": eid, "parentId": self.last, "timestamp": _iso(self.now)}
        obj.update(fields)
        n = self._emit(obj)
        self.last = eid
        self.stats["entries"] += 1
        if etype == "message":
            self.stats["messages"] += 1
        return eid, n

    def _tick(self, lo: int, hi: int) -> None:
        self.now += self.rnd.randint(lo, hi)

    # -- entries ----------------------------------------------------------------------

    def _header(self) -> None:
        p = self.p
        self._emit({"type": "session", "version": 3, "id": p.session_id, "timestamp": _iso(self.now), "cwd": CWD})
        self._tick(2, 9)
        self._entry("model_change", {"provider": self.provider, "modelId": self.model})
        self._entry("thinking_level_change", {"thinkingLevel": p.thinking_level})
        self._tick(1, 6)
        self._entry("custom", {"customType": "model-snapshot", "data": {
            "timestamp": self.now, "provider": self.provider, "modelApi": "anthropic-messages", "modelId": self.model}})

    def _user(self, text: str, image: str | None) -> None:
        content = [{"type": "text", "text": text}]
        if image:
            content.append({"type": "image", "data": image, "mimeType": "image/png"})
            self.stats["images"] += 1
        msg = {"role": "user", "content": content, "timestamp": self.now}
        self._tick(2, 40)
        parent = self.last
        eid, _ = self._entry("message", {"message": msg})
        self.turns.append((eid, parent))
        self.pending += len(text) // 3 + (1600 if image else 0)

    def _assistant(self, blocks: list, stop: str, out_chars: int, error: str | None = None) -> None:
        rnd = self.rnd
        started = self.now  # message.timestamp is when the request started
        self._tick(1_500, 45_000)
        if error:
            inp = out = cr = cw = 0
        else:
            inp, out, cr, cw = rnd.randint(1, 400), max(1, out_chars // 3 + rnd.randint(5, 60)), self.ctx, self.pending
        pi, po, pr, pw = self.price
        cost = {"input": inp * pi / 1e6, "output": out * po / 1e6,
                "cacheRead": cr * pr / 1e6, "cacheWrite": cw * pw / 1e6}
        cost["total"] = cost["input"] + cost["output"] + cost["cacheRead"] + cost["cacheWrite"]
        msg = {"role": "assistant", "content": blocks, "api": "anthropic-messages", "provider": self.provider,
               "model": self.model, "usage": {"input": inp, "output": out, "cacheRead": cr, "cacheWrite": cw,
                                              "totalTokens": inp + out + cr + cw, "cost": cost},
               "stopReason": stop, "timestamp": started}
        if error:
            msg["errorMessage"] = error
        self._entry("message", {"message": msg})
        self.ctx += inp + cw + out
        self.pending = 0

    def _tool_result(self, call_id: str, name: str, text: str, details: dict | None, is_error: bool,
                     duration_ms: int) -> None:
        self.now += duration_ms
        msg = {"role": "toolResult", "toolCallId": call_id, "toolName": name,
               "content": [{"type": "text", "text": text}]}
        if details is not None:
            msg["details"] = details
        msg["isError"] = is_error
        msg["timestamp"] = self.now
        self._tick(1, 30)
        self._entry("message", {"message": msg})
        self.pending += len(text) // 4
        if is_error:
            self.stats["tool_errors"] += 1

    # -- content ----------------------------------------------------------------------

    def _thinking_block(self) -> dict:
        rnd, prof = self.rnd, self.prof
        lang = "zh" if self.p.lang == "zh" and rnd.random() < 0.2 else "en"
        text = self.c.prose("think", lang, rnd.randint(*prof.think))
        if self.provider == "anthropic":
            sig = base64.b64encode(rnd.randbytes(rnd.randint(*prof.sig_bytes))).decode()
        else:
            sig = _hex(rnd, 64)
        self.stats["thinking"] += 1
        return {"type": "thinking", "thinking": text, "thinkingSignature": sig}

    def _call_id(self) -> str:
        self.call_no += 1
        if self.provider == "anthropic":
            return "toolu_01" + "".join(self.rnd.choices(_ALNUM, k=22))
        return "call_function_%s_%d" % ("".join(self.rnd.choices(_LOWER_ALNUM, k=12)), self.call_no)

    def _result_size(self, budget: int) -> int:
        """Chars of the next tool result: mostly small, sometimes medium, rarely huge."""
        rnd, prof = self.rnd, self.prof
        r = rnd.random()
        if r < prof.big_p and budget > 150_000:
            return rnd.randint(60_000, max(60_000, min(prof.big_cap, int(budget * 0.7))))
        if r < prof.big_p + prof.mid_p and budget > 20_000:
            return rnd.randint(4_000, min(40_000, budget // 2))
        return max(20, min(int(rnd.lognormvariate(math.log(500), 1.0)), prof.small_cap, max(50, budget // 3)))

    def _tool_step(self, budget: int) -> tuple[dict, tuple]:
        """One toolCall block and the (text, details, isError, durationMs) of its result."""
        rnd, c = self.rnd, self.c
        size = self._result_size(budget)
        call_id = self._call_id()
        r = rnd.random()
        if self.p.force_fail or r < 0.60:
            name = "exec"
            args, result = self._exec(size)
        elif r < 0.74:
            name = "read"
            args, result = self._read(size)
        elif r < 0.82:
            name = "write"
            path = "%s/%s/%s.py" % (CWD, rnd.choice(("src", "scripts", "tests")), rnd.choice(_MODULES))
            body = _repeat_to(rnd, c.code, c.avg["code"], min(size, 30_000), "\n")
            args = {"path": path, "content": body}
            result = ("Successfully wrote %d bytes to %s" % (len(body.encode()), path), None, False, rnd.randint(2, 40))
        elif r < 0.88:
            name = "process"
            sid = "%s-%s" % (rnd.choice(("calm", "fast", "warm", "bold", "quiet")),
                             rnd.choice(("river", "mist", "pine", "ember")))
            out = c.tool_output(rnd.choice(("build", "test", "log")), min(size, 8_000))
            status = rnd.choice(("running", "completed"))
            args = {"action": "poll", "sessionId": sid}
            details = {"status": status, "sessionId": sid}
            if status == "completed":
                details["exitCode"] = 0
            result = (out, details, False, rnd.randint(5, 2_000))
        else:
            name = "web_fetch"
            args, result = self._web_fetch(size)
        self.stats["tool_calls"] += 1
        return {"type": "toolCall", "id": call_id, "name": name, "arguments": args}, result

    def _exec(self, size: int) -> tuple[dict, tuple]:
        rnd, c, prof = self.rnd, self.c, self.prof
        chars = min(size, prof.big_cap // 2)  # output is stored twice (text + details.aggregated)
        if chars > 2_500:
            cmd, kind, slots = rnd.choice(c.scalable_commands)
        else:
            cmd, kind, slots = rnd.choice(c.commands)
            chars = chars if _KINDS[kind][3] else None
        duration = int(rnd.lognormvariate(math.log(300), 1.8)) + 3
        cwd = CWD if rnd.random() < 0.7 else CWD + "/agentbase"
        u = rnd.random()
        if self.p.force_fail or u < 0.10:
            # non-zero exit: not a tool error (isError false), the exit code tells
            self.p.force_fail = False
            code, out = rnd.choice(_FAILURES[kind])
            out = _fill(out, slots)
            self.stats["nonzero_exits"] += 1
            if rnd.random() < 0.7:
                text = (out + "\n\n" if out else "") + "(Command exited with code %d)" % code
                details = {"status": "completed", "exitCode": code, "durationMs": duration,
                           "aggregated": out, "cwd": cwd}
            else:  # the other shape seen in real files
                text = ((out + "\n\n") if out else "") + "Command exited with code %d" % code
                details = {"status": "error", "tool": "exec", "error": text, "aggregated": ""}
            return {"command": cmd}, (text, details, False, duration)
        if u < 0.115:
            partial = c.tool_output(kind, min(chars or 600, 2_000), slots)[: min(2_000, prof.small_cap)]
            err = "Command timed out after 120 seconds"
            details = {"status": "error", "tool": "exec", "error": err, "aggregated": partial, "cwd": cwd}
            return {"command": cmd, "timeout": 120}, (err + "\n\nPartial output:\n" + partial, details, True, 120_000)
        if u < 0.12:
            err = "exec denied: command requires approval (security policy)"
            return {"command": cmd}, (err, {"status": "error", "tool": "exec", "error": err}, True, 1)
        out = c.tool_output(kind, chars, slots)
        if len(out) > prof.small_cap and not chars:  # tiny profile: keep fixed-size outputs small too
            out = out[: prof.small_cap]
        details = {"status": "completed", "exitCode": 0, "durationMs": duration, "aggregated": out, "cwd": cwd}
        return {"command": cmd}, (out or "(no output)", details, False, duration)

    def _read(self, size: int) -> tuple[dict, tuple]:
        rnd, c = self.rnd, self.c
        if rnd.random() < 0.7:
            path = "%s/%s/%s.py" % (CWD, rnd.choice(("src", "importer", "tests")), rnd.choice(_MODULES))
            text = _repeat_to(rnd, c.code, c.avg["code"], size)
        else:
            path = "/var/log/%s/%s.log" % (rnd.choice(_SERVICES), rnd.choice(("error", "access", "app")))
            text = _repeat_to(rnd, c.log, c.avg["log"], size)
        if rnd.random() < 0.05:
            err = "ENOENT: no such file or directory, access '%s'" % path
            return {"path": path}, (err, {"status": "error", "tool": "read", "error": err}, True, 1)
        return {"path": path}, (text, None, False, rnd.randint(1, 30))

    def _web_fetch(self, size: int) -> tuple[dict, tuple]:
        rnd, c = self.rnd, self.c
        url = "https://%s/%s/%s" % (rnd.choice(_DOMAINS), rnd.choice(_WORDS) + "s", _hex(rnd, 6))
        args = {"url": url, "extractMode": "markdown"}
        if rnd.random() < 0.08:
            code = rnd.choice((403, 404, 500, 503))
            reason = {403: "Forbidden", 404: "Not Found", 500: "Internal Server Error", 503: "Service Unavailable"}
            err = "Web fetch failed (%d): %s" % (code, reason[code])
            return args, (err, {"status": "error", "tool": "web_fetch", "error": err}, True, rnd.randint(80, 3_000))
        title = rnd.choice(c.md_lines[:60])[3:]
        text = "# %s\n\n%s" % (title, _repeat_to(rnd, c.md_lines, c.avg["md"], max(100, size), "\n\n"))
        details = {"url": url, "finalUrl": url, "status": 200, "contentType": "text/html", "title": title,
                   "extractMode": "markdown", "length": len(text)}
        return args, (text, details, False, rnd.randint(80, 3_000))

    def _user_text(self) -> str:
        text = self.c.user_text(self.p.lang)
        if self.prof.prefix and self.p.channel in ("feishu", "telegram", "discord"):
            local = time.strftime("%Y-%m-%d %H:%M", time.gmtime(self.now // 1000 + 8 * 3600))
            text = "[%s %s | %s | %s GMT+8]\n%s" % (
                _CHANNEL_NAMES[self.p.channel], self.p.chat_type, self.p.sender, local, text)
        return text

    # -- structure --------------------------------------------------------------------

    def turn(self) -> None:
        """A user message, some tool rounds, and a final answer."""
        rnd, prof, p = self.rnd, self.prof, self.p
        self._tick(*prof.turn_gap_ms)
        image = None
        if p.force_image or (prof.image_p and rnd.random() < prof.image_p):
            n = rnd.randint(*prof.image_b64)
            if p.force_image or p.target - self.size > 2.5 * n:
                image = base64.b64encode(rnd.randbytes(n * 3 // 4)).decode()
            p.force_image = False
        self._user(self._user_text(), image)

        steps = 0
        while steps < prof.max_steps and rnd.random() < 0.72:
            steps += 1
        if p.force_fail:
            steps = max(steps, 1)
        for _ in range(steps):
            budget = max(0, p.target - self.size)
            blocks = []
            if p.thinking and rnd.random() < prof.think_p:
                blocks.append(self._thinking_block())
            if rnd.random() < 0.35:
                blocks.append({"type": "text", "text": self.c.prose("assistant", p.lang, rnd.randint(*prof.note))})
            ncalls = 2 if rnd.random() < prof.parallel_p else 1
            calls = [self._tool_step(budget // ncalls) for _ in range(ncalls)]
            blocks += [blk for blk, _ in calls]
            self._assistant(blocks, "toolUse", sum(len(orjson.dumps(b)) for b in blocks))
            for blk, (text, details, is_error, duration) in calls:
                self._tool_result(blk["id"], blk["name"], text, details, is_error, duration)
            if self.size >= p.target and steps > 1:
                break

        if rnd.random() < 0.01:  # provider failure: empty content, no usage
            self._assistant([], "error", 0, error=rnd.choice((
                '529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
                "Request timed out after 600000ms", "Connection error.")))
            return
        blocks = []
        if p.thinking and rnd.random() < prof.think_p * 0.85:
            blocks.append(self._thinking_block())
        answer = self.c.answer(p.lang, rnd.randint(*prof.answer), prof.extras)
        blocks.append({"type": "text", "text": answer})
        self._assistant(blocks, "stop", len(answer))

    def rewind(self) -> None:
        """Branch: the next user message hangs off the parent of an earlier user message, so the
        entries from that message to the current leaf stay in the file but leave the active path."""
        j = self.rnd.randrange(1, len(self.turns))
        _, parent = self.turns[j]
        self.last = parent
        del self.turns[j:]
        self.ctx = max(8_000, self.ctx * j // (j + 2))
        self.stats["branches"] += 1

    def compact(self) -> None:
        rnd, c, lang = self.rnd, self.c, self.p.lang
        kept = self.turns[-2][0] if len(self.turns) >= 2 else self.turns[-1][0]
        pool = c.zh_assistant if lang == "zh" else c.en_assistant
        summary = "## Goal\n%s\n\n## Progress\n%s\n\n## Next steps\n%s" % (
            c.prose("user", lang, rnd.randint(100, 300)),
            "\n".join("- " + s for s in rnd.choices(pool, k=rnd.randint(3, 8))),
            "\n".join("- " + s for s in rnd.choices(pool, k=rnd.randint(1, 4))))
        files = ["%s/src/%s.py" % (CWD, m) for m in rnd.sample(_MODULES, rnd.randint(1, 4))]
        self._tick(5_000, 40_000)
        self._entry("compaction", {"summary": summary, "firstKeptEntryId": kept,
                                   "tokensBefore": self.ctx + self.pending,
                                   "details": {"readFiles": files, "modifiedFiles": files[:1]}, "fromHook": False})
        self.ctx = len(summary) // 3 + rnd.randint(8_000, 20_000)
        self.stats["compactions"] += 1

    def switch_model(self) -> None:
        self.provider = "minimax" if self.provider == "anthropic" else "anthropic"
        self.model, self.price = self.rnd.choice(_MODELS[self.provider])
        self._tick(1_000, 30_000)
        self._entry("model_change", {"provider": self.provider, "modelId": self.model})

    def fill(self) -> None:
        """Write turns until the planned size is reached."""
        rnd, p = self.rnd, self.p
        for done in range(1, self.prof.max_turns + 1):
            self.turn()
            if self.size >= p.target and done >= p.min_turns:
                break
            # at most one structural event per turn boundary, so a branch always starts at a user message
            if p.branch_p and not self.stats["branches"] and len(self.turns) >= 2 and rnd.random() < p.branch_p:
                self.rewind()
            elif (p.compaction_p and not self.stats["compactions"] and len(self.turns) >= 3
                  and rnd.random() < p.compaction_p):
                self.compact()
            elif p.switch_p and rnd.random() < p.switch_p:
                self.switch_model()


# --------------------------------------------------------------------------------------
# writing trees
# --------------------------------------------------------------------------------------


class TreeWriter:
    """Writes session files and sessions.json indexes; keeps the summary figures."""

    def __init__(self, root, rnd: random.Random):
        self.root = Path(root)
        self.rnd = rnd
        self.dirs: set[Path] = set()
        self.index: dict[Path, dict] = {}
        self.sizes: list[int] = []
        self.bytes = 0
        self.largest = (0, "")
        self.max_line = 0
        self.kinds = {"normal": 0, "reset": 0, "topic": 0}
        self.totals: dict[str, int] = {}

    def _dir(self, server: str, agent: str) -> Path:
        d = self.root / server / "agents" / agent / "sessions"
        if d not in self.dirs:
            d.mkdir(parents=True, exist_ok=True)
            self.dirs.add(d)
        return d

    def write(self, server: str, session: Session, kind: str = "normal", index_p: float = 0.5) -> Path:
        """kind: normal (<id>.jsonl), topic (<id>-topic-<n>.jsonl) or reset (<id>.jsonl.reset.<ts>,
        the renamed live file: only the renamed name exists)."""
        rnd, p = self.rnd, session.p
        d = self._dir(server, p.agent)
        topic = rnd.randint(1, 9999)
        # renamed a while after the last line, but never after the fixed reference date
        reset_ms = max(session.now + 1_000, min(session.now + rnd.randint(60_000, 3 * DAY_MS), END_MS - 60_000))
        if kind == "topic":
            name = "%s-topic-%d.jsonl" % (p.session_id, topic)
        elif kind == "reset":
            name = "%s.jsonl.reset.%s" % (p.session_id, _name_ts(reset_ms))
        else:
            name = p.session_id + ".jsonl"
        path = d / name
        data = b"".join(session.lines)
        path.write_bytes(data)

        n = len(data)
        self.sizes.append(n)
        self.bytes += n
        if n > self.largest[0]:
            self.largest = (n, str(path))
        self.max_line = max(self.max_line, session.max_line)
        self.kinds[kind] += 1
        for k, v in session.stats.items():
            self.totals[k] = self.totals.get(k, 0) + v

        # sessions.json: only sessions that are still live get an index entry
        if kind != "reset" and rnd.random() < index_p:
            idx = self.index.setdefault(d, {})
            a = p.agent
            if p.spawned_by:
                key = "agent:%s:subagent:%s" % (a, _uuid4(rnd))
            elif "agent:%s:main" % a not in idx and p.channel == "webchat":
                key = "agent:%s:main" % a
            elif p.chat_type == "group":
                key = "agent:%s:%s:group:-100%010d" % (a, p.channel, rnd.randrange(10 ** 10))
            elif p.chat_type == "channel":
                key = "agent:%s:%s:channel:%018d" % (a, p.channel, rnd.randrange(10 ** 18))
            else:
                key = "agent:%s:%s:direct:%s" % (a, p.channel, p.sender)
            if kind == "topic":
                key += ":topic:%d" % topic
            label = "%s %s" % (rnd.choice(rnd.choice((_WORDS, _SERVICES))),
                               rnd.choice(("fix", "deploy", "review", "cleanup", "排查", "部署")))
            idx[key] = {
                "sessionId": p.session_id,
                "sessionFile": "%s/agents/%s/sessions/%s" % (STATE_DIR, a, name),
                "updatedAt": session.now,
                "label": label,
                "displayName": "%s:%s" % (p.channel, p.sender if p.chat_type == "direct" else label),
                "channel": p.channel,
                "chatType": p.chat_type,
                "spawnedBy": p.spawned_by,
            }
        return path

    def finish(self, **extra) -> dict:
        index_bytes = 0
        for d in sorted(self.index):
            data = orjson.dumps(self.index[d], option=orjson.OPT_INDENT_2) + b"\n"
            (d / "sessions.json").write_bytes(data)
            index_bytes += len(data)
        sizes = sorted(self.sizes)
        summary = {
            "root": str(self.root),
            "files": len(sizes) + len(self.index),
            "session_files": len(sizes),
            "index_files": len(self.index),
            "bytes": self.bytes + index_bytes,
            "transcript_bytes": self.bytes,
            "median_file_bytes": sizes[len(sizes) // 2] if sizes else 0,
            "largest_file": self.largest[1],
            "largest_file_bytes": self.largest[0],
            "max_line_bytes": self.max_line,
            "normal_files": self.kinds["normal"],
            "reset_files": self.kinds["reset"],
            "topic_files": self.kinds["topic"],
        }
        summary.update(self.totals)
        summary.update(extra)
        return summary


def generate_demo(root, seed: int = 0) -> dict:
    """Write the small (~2.5 MB) demo tree used by the README: 3 servers x 2-3 agents x 3-6 sessions,
    timestamps within the 7 days before 2026-11-28. Always contains a .reset rename, a -topic- file,
    a session with thinking, a branch and a compaction, an image, and exec commands with non-zero exits."""
    rnd = random.Random(seed)
    corpus = Corpus(rnd)
    w = TreeWriter(root, rnd)
    agents = list(DEFAULT_AGENTS)
    slots = []  # (server, agent) per session
    for server in DEFAULT_SERVERS:
        here = ["main"] + rnd.sample(agents[1:], rnd.randint(1, 2))
        for agent in here:
            slots += [(server, agent)] * rnd.randint(3, 6)
    sizes = [min(max(rnd.lognormvariate(math.log(60 * KIB), 0.6), 15 * KIB), 250 * KIB) for _ in slots]
    scale = 2.5 * MIB / sum(sizes)
    sizes = [int(s * scale) for s in sizes]
    sizes[2] = max(sizes[2], 150 * KIB)  # room for a branch and a compaction
    week_start = END_MS - 7 * DAY_MS
    for i, ((server, agent), size) in enumerate(zip(slots, sizes)):
        start = week_start + rnd.randrange(7 * DAY_MS - 10 * 3600_000)  # sessions last a few hours at most
        plan = Plan(rnd, agent, start, size, PROFILE_DEMO)
        plan.branch_p = plan.compaction_p = 0.0
        kind = "normal"
        if i == 0:
            kind = "reset"
        elif i == 1:
            kind = "topic"
        elif i == 2:
            # branch after turn 2 (rewinds to turn 1), compaction once 3 turns are on the path again
            plan.thinking, plan.thinking_level = True, "medium"
            plan.branch_p = plan.compaction_p = 1.0
            plan.min_turns = 6
        elif i in (3, 7):
            plan.force_fail = True
        elif i == 4:
            plan.force_image = True
        session = Session(corpus, plan)
        session.fill()
        w.write(server, session, kind, index_p=0.6)
    return w.finish(sessions=len(slots))
