"""The text the full-text indexes see (importer.search.index_text): Chinese, Japanese and Korean
runs as overlapping character pairs, whichever way a text's runs are paired (one by one, or all
at once when a text has many)."""

import random
import re
import sqlite3

from importer.search import CJK_RANGES, TOKENIZE, _MANY_RUNS, fts_query, index_text

_RUN = re.compile(f"([{CJK_RANGES}]+)")


def expected(text: str) -> str:
    """What index_text must give: every CJK run, between spaces, as its pairs (a lone character
    as it is), the rest of the text as it was; then a line of each longer run's last character."""
    out = []
    last = []
    for k, part in enumerate(_RUN.split(text)):
        if k % 2 == 0:
            out.append(part)
        else:
            pairs = [part[i:i + 2] for i in range(len(part) - 1)] or [part]
            out.append(" " + " ".join(pairs) + " ")
            if len(part) > 1:
                last.append(part[-1])  # then, after the text, the last character of each run of two or more
    return "".join(out) + ("\n" + " ".join(last) if last else "")


def test_pairs_equal_the_rule_for_few_and_many_runs():
    rng = random.Random(7)
    # the edges of every CJK range, a lone mark, astral characters, the \x01 the pairing uses inside
    alphabet = ["服", "务", "器", "部", "署", "あ", "カ", "한", "\u3040", "\u30ff", "\u3400", "\u4dbf", "\u4e00",
                "\u9fff", "\uf900", "\ufaff", "\uac00", "\ud7af", " ", "a", "Z", "7", ".", "\n", "\x01", "é", "😀", "—"]
    many = 0
    for _ in range(5000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 300)))
        assert index_text(text) == expected(text), repr(text)
        many += len(_RUN.findall(text)) >= _MANY_RUNS
    assert many > 1000  # both ways of pairing were checked
    assert index_text("部署 nginx 到服务器") == " 部署  nginx  到服 服务 务器 \n署 器"
    assert index_text("plain ascii") == "plain ascii"


def test_a_text_of_many_runs_is_found_by_every_word_and_phrase():
    # one message of 30 runs: Chinese between English words, punctuation and lone characters
    words = ["部署", "服务器", "日志", "错误", "重启", "配置文件"]
    pieces = []
    for i in range(30):
        pieces.append(words[i % len(words)] + ("，" if i % 3 else f" step{i} ") + ("好" if i % 5 == 0 else ""))
    text = "nginx" + "".join(pieces) + "完成error"
    assert len(_RUN.findall(text)) >= _MANY_RUNS
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE f USING fts5(body, content='', tokenize='{TOKENIZE}')")
    conn.execute("INSERT INTO f (rowid, body) VALUES (1, ?)", (index_text(text),))
    conn.execute("INSERT INTO f (rowid, body) VALUES (2, ?)", (index_text("无关的内容 unrelated"),))

    def found(q: str) -> list[int]:
        return [r[0] for r in conn.execute("SELECT rowid FROM f WHERE f MATCH ? ORDER BY rowid", (fts_query(q),))]

    for q in [*words, "nginx", "step0", "step27", "error", "完成", "服务器 日志", "好服"]:
        assert found(q) == [1], q
    assert found("内容") == [2]
    # a single character: at the start of a pair (部), the end of a run (器), in the middle (务), alone (好)
    for q in ("部", "器", "务", "好"):
        assert found(q) == [1], q
    assert found("容") == found("关") == [2]
    assert found("猫") == []
    assert found("器日") == []  # pairs never cross a comma (服务器，日志)
    assert found("nginx部署") == [1]  # a phrase across the boundary of a run
