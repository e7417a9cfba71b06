#!/usr/bin/env python3
"""Generates the Unicode tables of emergent's byte-level BPE tokenizer (io/tokenizer.hpp).

Writes two headers, both committed:

  include/emergent/io/unicode_categories.hpp   letters (General_Category L*), numbers (N*) and
                                               White_Space: the \\p{L}, \\p{N} and \\s of the GPT-2
                                               split pattern, as sorted code point ranges.
  include/emergent/io/unicode_nfc_tables.hpp   canonical combining classes, canonical
                                               decompositions and primary compositions: the data
                                               of NFC (io/unicode_nfc.hpp).

Versions follow what Hugging Face `tokenizers` 0.23.3 does, measured on every code point by
make_tokenizer_golden.py (fixtures tests/golden/tokenizer/unicode_classes.json and nfc.json):

  * categories are Unicode 16.0 (the tables of the regex engine inside `tokenizers`), read from
    the PyPI package `unicodedata2==16.0.0` (Python's `unicodedata` with newer data; the
    interpreter's own module is older: 14.0 in Python 3.11);
  * White_Space comes from PropList.txt (unchanged since Unicode 6.3);
  * normalization is Unicode 9.0: `tokenizers` normalizes with the unicode-normalization-
    alignments crate, whose tables are Unicode 9.0 (its NFC agrees with Python 3.6's
    `unicodedata`, Unicode 9.0, on every code point; Python 3.7's 11.0 already differs). Here the
    Unicode 16.0 decompositions and combining classes are kept only for code points assigned in
    9.0 or earlier (DerivedAge.txt): the Unicode stability policy freezes both properties once a
    character is assigned, so that is exactly the 9.0 data.

PropList.txt and DerivedAge.txt are read from /usr/share/unicode (Debian package `unicode-data`;
another folder: --ucd-dir). Rerun:

  apt-get install unicode-data
  python3 -m pip install --target /tmp/unicodedata2 unicodedata2==16.0.0
  PYTHONPATH=/tmp/unicodedata2 python3 tests/golden/make_unicode_tables.py

The output is deterministic; the script asserts the versions it needs.
"""

import argparse
import pathlib

import unicodedata2 as ucd

CATEGORY_UNICODE_VERSION = "16.0.0"
NORMALIZATION_UNICODE_VERSION = (9, 0)
MAX_CODE_POINT = 0x10FFFF
HANGUL_SYLLABLES = range(0xAC00, 0xD7A4)  # composed algorithmically, not by table

REPO = pathlib.Path(__file__).resolve().parents[2]
OUT_DIR = REPO / "include" / "emergent" / "io"


def code_points():
    return (cp for cp in range(MAX_CODE_POINT + 1) if not 0xD800 <= cp <= 0xDFFF)


def ranges_of(members):
    """Sorted code points -> list of inclusive (first, last) runs."""
    runs = []
    for cp in members:
        if runs and runs[-1][1] == cp - 1:
            runs[-1][1] = cp
        else:
            runs.append([cp, cp])
    return runs


def read_property_file(path, wanted_value):
    """Code points whose value in a UCD `range ; value` file equals `wanted_value`."""
    members = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        cps, value = (field.strip() for field in line.split(";"))
        first, _, last = cps.partition("..")
        if value == wanted_value:
            members.update(range(int(first, 16), int(last or first, 16) + 1))
    return members


def assigned_by_version(derived_age_path, version):
    """Code points assigned in Unicode `version` (major, minor) or earlier."""
    members = set()
    for line in derived_age_path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        cps, age = (field.strip() for field in line.split(";"))
        if tuple(int(part) for part in age.split(".")) <= version:
            first, _, last = cps.partition("..")
            members.update(range(int(first, 16), int(last or first, 16) + 1))
    return members


def format_rows(items, width=100):
    """Items packed into lines of at most `width` columns, indented by 4."""
    lines = []
    for item in items:
        if lines and len(lines[-1]) + 1 + len(item) <= width:
            lines[-1] += " " + item
        else:
            lines.append("    " + item)
    return "\n".join(lines)


def hex_cp(cp):
    return f"0x{cp:04X}"


def category_header(ucd_dir):
    assert ucd.unidata_version == CATEGORY_UNICODE_VERSION, (
        f"need unicodedata2=={CATEGORY_UNICODE_VERSION}, found {ucd.unidata_version}")
    letters = [cp for cp in code_points() if ucd.category(chr(cp)).startswith("L")]
    numbers = [cp for cp in code_points() if ucd.category(chr(cp)).startswith("N")]
    white_space = sorted(read_property_file(ucd_dir / "PropList.txt", "White_Space"))

    def table(name, members):
        runs = ranges_of(members)
        items = [f"{{{hex_cp(a)}, {hex_cp(b)}}}," for a, b in runs]
        return (f"inline constexpr CodePointRange {name}[] = {{\n"
                f"{format_rows(items)}\n}};\n")

    return f"""\
// GENERATED by tests/golden/make_unicode_tables.py -- do not edit; rerun the script instead.
//
// The three character classes of the GPT-2 split pattern used by byte-level BPE tokenizers
// (io/tokenizer.hpp): \\p{{L}} = General_Category L* (Lu Ll Lt Lm Lo), \\p{{N}} = N* (Nd Nl No),
// \\s = the White_Space property. Categories are Unicode {CATEGORY_UNICODE_VERSION} and
// White_Space is from PropList.txt, which is what Hugging Face `tokenizers` 0.23.3 uses (checked
// on every code point against tests/golden/tokenizer/unicode_classes.json). No code point is in
// two classes. Tables are sorted, disjoint, inclusive ranges of code points.
// clang-format off
#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>

namespace emergent::unicode {{

struct CodePointRange {{
  char32_t first;
  char32_t last;  // inclusive
}};

{table("letter_ranges", letters)}
{table("number_ranges", numbers)}
{table("white_space_ranges", white_space)}
template <std::size_t N>
constexpr bool in_ranges(const CodePointRange (&ranges)[N], char32_t code_point) {{
  // First range whose last >= code_point; the code point is inside iff that range starts <= it.
  const auto* range =
      std::lower_bound(std::begin(ranges), std::end(ranges), code_point,
                       [](const CodePointRange& r, char32_t cp) {{ return r.last < cp; }});
  return range != std::end(ranges) && range->first <= code_point;
}}

constexpr bool is_letter(char32_t code_point) {{ return in_ranges(letter_ranges, code_point); }}
constexpr bool is_number(char32_t code_point) {{ return in_ranges(number_ranges, code_point); }}
constexpr bool is_white_space(char32_t code_point) {{
  return in_ranges(white_space_ranges, code_point);
}}

}}  // namespace emergent::unicode
"""


def canonical_decomposition(cp):
    """One level of the canonical decomposition of `cp` as a list; [] if it has none (or only a
    compatibility one)."""
    fields = ucd.decomposition(chr(cp)).split()
    if not fields or fields[0].startswith("<"):
        return []
    return [int(field, 16) for field in fields]


def nfc_header(ucd_dir):
    assigned = assigned_by_version(ucd_dir / "DerivedAge.txt", NORMALIZATION_UNICODE_VERSION)
    version = ".".join(str(part) for part in NORMALIZATION_UNICODE_VERSION)

    combining = [(cp, ucd.combining(chr(cp))) for cp in sorted(assigned)]
    combining = [(cp, ccc) for cp, ccc in combining if ccc != 0]
    class_runs = []
    for cp, ccc in combining:
        if class_runs and class_runs[-1][1] == cp - 1 and class_runs[-1][2] == ccc:
            class_runs[-1][1] = cp
        else:
            class_runs.append([cp, cp, ccc])

    decompositions = []
    primary_composites = []
    for cp in sorted(assigned):
        if cp in HANGUL_SYLLABLES:
            continue
        parts = canonical_decomposition(cp)
        if not parts:
            continue
        assert len(parts) in (1, 2) and all(part in assigned for part in parts), hex(cp)
        decompositions.append((cp, parts[0], parts[1] if len(parts) == 2 else 0))
        # A primary composite: NFC puts the pair back together (not excluded, not a singleton,
        # not a non-starter decomposition).
        if len(parts) == 2 and ucd.normalize("NFC", chr(parts[0]) + chr(parts[1])) == chr(cp):
            primary_composites.append((parts[0], parts[1], len(decompositions) - 1))
    primary_composites.sort()
    assert len(decompositions) < 2**16

    # Below this code point every character is its own NFC, has combining class 0 and composes
    # with nothing, so text made only of such characters is already NFC.
    touched = {cp for cp, _ in combining} | {cp for cp, _, _ in decompositions
                                             if ucd.normalize("NFC", chr(cp)) != chr(cp)}
    touched |= {second for _, second, _ in primary_composites}
    first_touched = min(touched)

    class_items = [f"{{{hex_cp(a)}, {hex_cp(b)}, {ccc}}}," for a, b, ccc in class_runs]
    decomposition_items = [f"{{{hex_cp(c)}, {hex_cp(a)}, {hex_cp(b)}}},"
                           for c, a, b in decompositions]
    composition_items = [f"{index}," for _, _, index in primary_composites]

    return f"""\
// GENERATED by tests/golden/make_unicode_tables.py -- do not edit; rerun the script instead.
//
// Unicode {version} normalization data for NFC (io/unicode_nfc.hpp), the version Hugging Face
// `tokenizers` normalizes with (checked on every code point against
// tests/golden/tokenizer/nfc.json). Hangul syllables are left out: they decompose and compose
// by arithmetic.
//   combining_class_ranges    inclusive code point runs with one nonzero canonical combining
//                             class; every other code point has class 0. Sorted.
//   canonical_decompositions  one level of each canonical decomposition (apply again to the
//                             parts for the full one); `second` is 0 for a singleton. Sorted by
//                             composite.
//   primary_composites        indices into canonical_decompositions of the pairs that NFC
//                             composes (composition exclusions, singletons and non-starter
//                             decompositions left out), sorted by (first, second).
// clang-format off
#pragma once

#include <cstdint>

namespace emergent::unicode {{

struct CombiningClassRange {{
  char32_t first;
  char32_t last;  // inclusive
  std::uint8_t combining_class;
}};

struct CanonicalDecomposition {{
  char32_t composite;
  char32_t first;
  char32_t second;  // 0 for a singleton decomposition
}};

// Text whose code points are all below this one is already in NFC.
inline constexpr char32_t first_code_point_nfc_may_change = {hex_cp(first_touched)};

inline constexpr CombiningClassRange combining_class_ranges[] = {{
{format_rows(class_items)}
}};

inline constexpr CanonicalDecomposition canonical_decompositions[] = {{
{format_rows(decomposition_items)}
}};

inline constexpr std::uint16_t primary_composites[] = {{
{format_rows(composition_items)}
}};

}}  // namespace emergent::unicode
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ucd-dir", type=pathlib.Path, default=pathlib.Path("/usr/share/unicode"),
                        help="folder with PropList.txt and DerivedAge.txt")
    args = parser.parse_args()
    for name, text in (("unicode_categories.hpp", category_header(args.ucd_dir)),
                       ("unicode_nfc_tables.hpp", nfc_header(args.ucd_dir))):
        path = OUT_DIR / name
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(REPO)} ({len(text)} bytes)")


if __name__ == "__main__":
    main()
