#!/usr/bin/env python3
"""ListOps examples written by `emergent listops` (LRA's TSV: Source, Target), read as LRA reads
them and checked by an evaluator written from LRA's rules, independent of the C++ one:

  - Source is LRA's serialisation, the tree as nested "( left right )" pairs
    (lra_benchmarks/data/listops.py, to_string); it is parsed back into the tree here, and each
    list evaluated as to_value does: MIN, MAX, MED = int(np.median) (the mean of the two middle
    values, truncated, for an even count; statistics.median here), SM = sum mod 10;
  - the model-side tokens are LRA's input pipeline's (lra_benchmarks/listops/input_pipeline.py):
    "]" -> "X", parentheses deleted, whitespace split; their count must lie strictly inside the
    length bounds, and operators must sit no deeper than max_depth - 1.

    emergent listops --min-length 20 --max-length 300 --count 500 | tests/listops/lra_oracle.py 20 300 10
"""
import statistics
import sys

OPERATORS = {"[MIN", "[MAX", "[MED", "[SM"}


def parse(words, i):
    """The node starting at words[i] of the parenthesised form: (value or list, next index)."""
    if words[i] != "(":
        return words[i], i + 1
    left, i = parse(words, i + 1)
    right, i = parse(words, i)
    assert words[i] == ")", f"expected ')' at word {i}"
    return (left, right), i + 1


def flatten(node):
    """LRA's left-nested pairs ((((op, a1), a2), ...), ']') -> [op, a1, a2, ..., ']']."""
    items = []
    while isinstance(node, tuple):
        node, right = node
        items.append(right)
    items.append(node)
    return items[::-1]


def value(node, depth=1):
    if not isinstance(node, tuple):
        return int(node), 0
    items = flatten(node)
    op, args, close = items[0], items[1:-1], items[-1]
    assert op in OPERATORS and close == "]", items
    values, deepest = [], depth
    for a in args:
        v, d = value(a, depth + 1)
        values.append(v)
        deepest = max(deepest, d)
    if op == "[MIN":
        result = min(values)
    elif op == "[MAX":
        result = max(values)
    elif op == "[MED":
        result = int(statistics.median(values))
    else:
        result = sum(values) % 10
    return result, deepest


def main():
    min_length, max_length, max_depth = (int(a) for a in sys.argv[1:4])
    lines = sys.stdin.read().splitlines()
    assert lines[0] == "Source\tTarget", lines[0]
    labels = [0] * 10
    for n, line in enumerate(lines[1:], 1):
        source, target = line.split("\t")
        words = source.split()
        tree, end = parse(words, 0)
        assert end == len(words), f"row {n}: words after the tree"
        result, deepest = value(tree)
        assert result == int(target), f"row {n}: LRA's rules give {result}, the file says {target}"
        tokens = source.replace("]", "X").replace("(", "").replace(")", "").split()
        assert min_length < len(tokens) < max_length, f"row {n}: {len(tokens)} tokens"
        assert deepest <= max_depth - 1, f"row {n}: an operator at depth {deepest}"
        labels[result] += 1
    assert sum(labels) == len(lines) - 1 and len(lines) > 1
    print(f"lra_oracle: {len(lines) - 1} examples agree with LRA's rules; labels {labels}")


main()
