#!/usr/bin/env python3
"""Golden fixtures for emergent's byte-level BPE tokenizer (include/emergent/io/tokenizer.hpp),
made by the real Hugging Face `tokenizers` library.

Rerun (creates the venv with `tokenizers`, then regenerates tests/golden/tokenizer/):

  bash tests/golden/setup-hf-venv.sh
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv-torch/bin/python tests/golden/make_tokenizer_golden.py

The fixtures in the repository were made with tokenizers 0.23.3; the version is recorded in
golden.json. Training is deterministic, so a rerun with that version gives the same files.

What it writes to tests/golden/tokenizer/:

  tokenizer.json          a small byte-level BPE trained here on CORPUS and configured like the
                          GPT-NeoX-20B (Pythia) tokenizer: NFC normalizer, ByteLevel pre-tokenizer
                          (add_prefix_space false, GPT-2 split pattern), ByteLevel post-processor
                          and decoder, special added tokens <|endoftext|> (id 0) and <|padding|>
                          (id 1, special, not normalized) and runs of 2..4 spaces as normal added
                          tokens (normalized, longest first) like Pythia's 2..24. Merges are saved
                          as ["left", "right"] pairs (what tokenizers >= 0.20 writes).
  tokenizer_string_merges.json
                          the same tokenizer with merges as "left right" strings (the form of
                          Pythia's file); the script checks that `tokenizers` encodes every case
                          identically from both files.
  tokenizer_prefix_space.json
                          the same with pre_tokenizer.add_prefix_space true, no normalizer and
                          model.ignore_merges true, to test those flags.
  golden.json             for each string of CASES and 100 seeded random strings: the ids,
                          decode(ids) and decode(ids, skip_special_tokens) from tokenizer.json,
                          and the ids and decode from tokenizer_prefix_space.json; every token
                          string by id; decodes of every single id and of byte sequences that
                          are not valid UTF-8.
  unicode_classes.json    how the ByteLevel pre-tokenizer classifies every code point (letter L,
                          number N, white space S; anything not listed is "other"), measured by
                          pre-tokenizing "a"+c, "0"+c and "!"+c: c joins the first iff \\p{L},
                          the second iff \\p{N}, the third iff [^\\s\\p{L}\\p{N}]. Ranges
                          [first, last, class].
  nfc.json                [input, NFC(input)] from the NFC normalizer of `tokenizers` for every
                          code point that has a canonical decomposition or a nonzero combining
                          class in this interpreter's `unicodedata` (Unicode 14.0 in Python 3.11),
                          every Hangul jamo and every 97th Hangul syllable: the character, its
                          canonical decomposition, and for marks "a" + mark + U+0334 U+0316 U+0301
                          U+0345 (classes 1, 220, 230, 240: where the mark sorts tells its class).
                          The script asserts that NFC leaves every other code point alone.

The C++ test (tests/test_tokenizer.cpp) checks all of it.
"""

import json
import pathlib
import random
import unicodedata

import tokenizers
from tokenizers import (AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers,
                        processors, trainers)

OUT = pathlib.Path(__file__).resolve().parent / "tokenizer"
VOCAB_SIZE = 600  # 256 bytes + 2 specials + 342 merges
SPACE_RUNS = range(4, 1, -1)  # added tokens "    ", "   ", "  " (Pythia: 24 down to 2)

CORPUS = """\
The weather was mild on the morning the survey team left the harbour.
They carried maps, a compass, three notebooks and enough bread for a week.
By noon the path had climbed above the trees, and the valley lay open below them.
Nobody said much; the wind did the talking, and it didn't stop until evening.
At 6 pm they counted the samples: 12 jars of soil, 7 of water, 31 pressed leaves.
"We'll need more jars," she said. "They're cheap, but I'd rather not carry them."
He laughed. "You've said that every year since 1998, and we've always managed."
The second day began with rain. The third began with more rain, then sunshine.
On the fourth day they reached the old station, which had been empty for decades.
Its windows were broken, its doors were gone, and its roof let in the sky.
Inside, on a table, someone had left a kettle, a cup and a letter dated 1957.
The letter was short: it thanked the reader for keeping the station in order.
They read it twice, put it back, and made tea in the kettle before they went on.
Numbers matter here: 0 7 3 1 2, 100, 2024, 3.14159, 42 and 1,000,000.
Counting again: one, two, three, four, five, six, seven, eight, nine, ten.
Some words travel well: café, naïve, résumé, über, Straße, smörgåsbord, jalapeño.
Greek and Russian: Καλημέρα κόσμε, добрый день, спасибо, пожалуйста.
Chinese and Japanese: 中文字符, 你好世界, 日本語のテキスト, こんにちは.
Emoji and symbols: 😀 👍 🎉 ✓ → ← ★ © ® € £ ¥ ½ ¾ ² ³ ° ± × ÷.
Code looks like this: if (x > 0) { return f(x) * 2; } else { return -1; }
Paths and addresses: /usr/local/bin, C:\\Users\\team, www.example.org, a_b-c.d
Tabs\tseparate\tcolumns, and newlines
separate lines; double  spaces and   triple spaces   appear too.
"""

CASES = [
    "", " ", "  ", "   ", "    ", "     ", "      ", "         ",
    "\t", "\t\t", "\n", "\n\n", "\r\n", " \n ", "\n \n", "\t \t", " \t\n\r\x0b\x0c ",
    "a  b", "a   b", "a    b", "a     b", "a      b", "a \tb", "a\t b", "a \n b",
    "Hello world", " Hello world", "Hello world ", "Hello world   ", "   Hello world",
    "trailing space ", "trailing spaces    ", "  leading", "x\n\ny", "line1\nline2\r\nline3\n",
    "tabs\tand\t\ttabs", "mixed \t \n  spaces\t\n",
    "The weather was mild on the morning the survey team left the harbour.",
    "café naïve résumé", "cafe\u0301 nai\u0308ve", "Straße STRASSE ß", "über Über",
    "中文字符", "你好世界 and 日本語のテキスト", "Καλημέρα κόσμε", "добрый день",
    "العربية", "한국어 텍스트", "\u1100\u1161\u11a8 \u1100\u1161 \uac00\u11a8",
    "emoji 😀👍🏽 family 👨\u200d👩\u200d👧 flag 🇫🇷", "😀", "👍🏽",
    "ﬁ ligature", "\u212b angstrom \u00c5 A\u030a", "q\u0307\u0323 q\u0323\u0307",
    "e\u0323\u0302 \u1ec7", "\u0301 leading mark", "a\u0345\u0334\u0316\u0301",
    "0 7 3 1 2", "12345678901234567890", "3.14159", "year 1999 and 2024", "1,000,000",
    "\u0661\u0662\u0663 \u0664\u0665\u0666", "½ ⅓ ² ³ Ⅻ ⑦", "x²+y²=z²", "v1.2.3-rc4",
    "don't I'll we're they've she'd I'm it's", "DON'T I'LL WE'RE", "'s's'", "''s",
    "rock 'n' roll", "O'Neil's book", "'", "' s", "can't'nt",
    "!!!???...", "--- *** ///", "hello,world;foo:bar", "(a)[b]{c}<d>", "a-b_c.d",
    "if (x > 0) { return f(x) * 2; }", "@#$%^&*", " !", " ! ?",
    "a\u00a0b", "a\u2003b", "a\u3000b", "a\u0085b", "a\u001fb", "a\u001cb", "zero\u200bwidth",
    "\u2028\u2029", "a \u00a0 b", "\u00a0\u00a0x",
    "<|endoftext|>", "Hello<|endoftext|>world", "<|endoftext|><|padding|>",
    "<|endoftext|> leading space after", "text <|endoftext|>", "<|endoftext", "<|endoftext|>>",
    "<|endoftext|>\u0301", "<|padding|>  <|endoftext|>", "a  <|endoftext|>  b",
    "supercalifragilisticexpialidocious", "a" * 40, "ab" * 25, "the" * 10, " the" * 10,
    "\x00\x01\x7f", "\x1b[31mred\x1b[0m",
    "Hello, my name is John. I'm 25 years old!\n\nNew paragraph:\n\t- item 1\n\t- item 2   \n",
    "\U0010fffd \U000e0001 \ufeff \ufffd",
]

# Pieces of random strings (CASES also gets RANDOM_CASE_COUNT of them, seeded): ASCII that the
# split pattern treats differently, contractions, space runs, specials, awkward white space,
# combining marks and (de)composed letters, Hangul jamo, digits of other scripts, emoji, and
# characters newer than Unicode 9.0 that NFC must leave alone.
RANDOM_PIECES = [*"abcXYZ  \t\n\r'sdtmlrve0123456789.,!?-_()", "'s", "'ll", "'re", "  ", "   ",
                 "<|endoftext|>", "<|padding|>", "\u00a0", "\u0085", "\u2003", "\u3000", "\u001f",
                 "\u200b", "é", "e\u0301", "\u0301", "\u0323", "\u0345", "ß", "中", "文", "😀",
                 "👍🏽", "\u200d", "Ω", "\u212b", "A\u030a", "\u1100", "\u1161", "\u11a8", "가", "ﬁ",
                 "½", "²", "٣", "Ⅻ", "\u0f73", "\u0958", "\U0001d400", "\U000105d2\u0307",
                 "\U00011935\U00011930", "q\u0307\u0323"]
RANDOM_CASE_COUNT = 100
RANDOM_SEED = 20240607

# Byte sequences for decode that are not valid UTF-8 (each byte one id).
INVALID_BYTE_SEQUENCES = [
    [0xF0, 0x9F, 0x98],        # emoji cut short
    [0xF0, 0x9F, 0x98, 0x41],  # ... followed by 'A'
    [0x80], [0xBF, 0x80],      # stray continuation bytes
    [0xC0, 0x80], [0xC1, 0xBF],  # overlong
    [0xE0, 0x80, 0x80], [0xE0, 0x9F, 0xBF],  # overlong 3-byte
    [0xED, 0xA0, 0x80],        # surrogate
    [0xF4, 0x90, 0x80, 0x80],  # above U+10FFFF
    [0xF5, 0x80], [0xFF, 0x41],
    [0xE2, 0x82], [0xE2, 0x82, 0xAC, 0xE2],  # cut in the middle, then at the end
    [0x41, 0xC3, 0x42, 0xC3, 0xA9],
]


def byte_to_character():
    """GPT-2's bytes_to_unicode, written out (the same table as the C++ side)."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table, extra = {}, 0x100
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(extra)
            extra += 1
    return table


def train():
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True,
                                                       use_regex=True)
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=1, show_progress=False,
                                  special_tokens=["<|endoftext|>", "<|padding|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(CORPUS.splitlines(keepends=True), trainer)
    tokenizer.add_tokens([AddedToken(" " * n, single_word=False, lstrip=False, rstrip=False,
                                     normalized=True, special=False) for n in SPACE_RUNS])
    return tokenizer


def write_json(name, value):
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    (OUT / name).write_text(text + "\n", encoding="utf-8")
    return text


def save_variant(config, name, edit):
    variant = json.loads(json.dumps(config))
    edit(variant)
    # Indented like the files on the hub, one merge or vocab entry per line.
    text = json.dumps(variant, ensure_ascii=False, indent=1)
    (OUT / name).write_text(text + "\n", encoding="utf-8")
    return Tokenizer.from_file(str(OUT / name))


def to_string_merges(config):
    merges = config["model"]["merges"]
    assert all(isinstance(m, list) and len(m) == 2 for m in merges), "expected pair merges"
    assert all(" " not in m[0] + m[1] for m in merges)
    config["model"]["merges"] = [f"{left} {right}" for left, right in merges]


def to_prefix_space(config):
    config["pre_tokenizer"]["add_prefix_space"] = True
    config["normalizer"] = None
    config["model"]["ignore_merges"] = True


def unicode_classes():
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)

    def joins(prefix, c):
        return len(byte_level.pre_tokenize_str(prefix + c)) == 1

    ranges = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        joined = [cls for prefix, cls in (("a", "L"), ("0", "N"), ("!", "O")) if joins(prefix, c)]
        assert len(joined) <= 1, hex(cp)
        cls = joined[0] if joined else "S"
        if cls == "O":
            continue
        if ranges and ranges[-1][1] == cp - 1 and ranges[-1][2] == cls:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp, cls])
    return ranges


def nfc_cases():
    nfc = normalizers.NFC()
    marks = "\u0334\u0316\u0301\u0345"
    cases = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        decomposed = unicodedata.normalize("NFD", c)
        combining = unicodedata.combining(c)
        hangul_syllable = 0xAC00 <= cp <= 0xD7A3
        if (decomposed == c and combining == 0 and not 0x1100 <= cp <= 0x11FF) or (
                hangul_syllable and (cp - 0xAC00) % 97 != 0):
            assert nfc.normalize_str(c) == c, hex(cp)
            continue
        inputs = [c] + ([decomposed] if decomposed != c else [])
        if combining:
            inputs.append("a" + c + marks)
        cases += [[text, nfc.normalize_str(text)] for text in inputs]
    return cases


def main():
    OUT.mkdir(exist_ok=True)
    tokenizer = train()
    config = json.loads(tokenizer.to_str())
    pair_merges = save_variant(config, "tokenizer.json", lambda c: None)
    string_merges = save_variant(config, "tokenizer_string_merges.json", to_string_merges)
    prefix_space = save_variant(config, "tokenizer_prefix_space.json", to_prefix_space)

    rng = random.Random(RANDOM_SEED)
    random_cases = ["".join(rng.choice(RANDOM_PIECES) for _ in range(rng.randint(0, 20)))
                    for _ in range(RANDOM_CASE_COUNT)]
    cases = []
    for text in CASES + random_cases:
        ids = pair_merges.encode(text).ids
        assert string_merges.encode(text).ids == ids, text
        prefix_ids = prefix_space.encode(text).ids
        cases.append({
            "text": text,
            "ids": ids,
            "decoded": pair_merges.decode(ids, skip_special_tokens=False),
            "decoded_skip_special": pair_merges.decode(ids, skip_special_tokens=True),
            "prefix_space_ids": prefix_ids,
            "prefix_space_decoded": prefix_space.decode(prefix_ids, skip_special_tokens=False),
        })

    vocab_size = pair_merges.get_vocab_size(with_added_tokens=True)
    every_id = range(vocab_size)
    character = byte_to_character()
    byte_ids = [[pair_merges.token_to_id(character[b]) for b in sequence]
                for sequence in INVALID_BYTE_SEQUENCES]
    golden = {
        "tokenizers_version": tokenizers.__version__,
        "vocab_size": vocab_size,
        "special_ids": sorted(i for i, token in pair_merges.get_added_tokens_decoder().items()
                              if token.special),
        "tokens": [pair_merges.id_to_token(i) for i in every_id],
        "single_id_decoded": [pair_merges.decode([i], skip_special_tokens=False) for i in every_id],
        "invalid_utf8_decodes": [
            {"ids": ids, "decoded": pair_merges.decode(ids, skip_special_tokens=False)}
            for ids in byte_ids],
        "cases": cases,
    }
    sizes = {
        "golden.json": len(write_json("golden.json", golden)),
        "unicode_classes.json": len(write_json("unicode_classes.json", unicode_classes())),
        "nfc.json": len(write_json("nfc.json", nfc_cases())),
    }
    print(f"tokenizers {tokenizers.__version__}: vocab {vocab_size}, "
          f"{len(config['model']['merges'])} merges, {len(cases)} cases; sizes {sizes}")


if __name__ == "__main__":
    main()
