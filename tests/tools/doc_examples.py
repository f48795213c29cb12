#!/usr/bin/env python3
"""The examples of dtrain's documentation, and the figures they quote.

tests/cli/examples.bats runs every example this script finds, and checks
what it prints with it:

  doc_examples.py list FILE...     one JSON object per example, in order
  doc_examples.py compare [--counts-only] EXPECTED ACTUAL [WHERE]
                                   exit 0 when ACTUAL's lines show the
                                   figures of EXPECTED's, else say which not;
                                   --counts-only: not the trained figures

Where examples are:
  - in a man page (*.1, *.5): every command of an .EX/.EE block of the
    EXAMPLES section, and of other blocks tagged `run`;
  - in README.md: every command of a fenced block marked sh (or unmarked,
    when its first line that is not a comment is a command: other unmarked
    blocks show output), and every python block (one example: the whole
    block, run by python3).

A command is a line whose first word, after VAR=value assignments and a
"$ " prompt, is one of PROGRAMS; a line that ends in "\\", "|" or "&&" goes
on to the next. The lines right after a command that are not commands are
the output it quotes ("..." stands for lines left out); "^C" means the
command is stopped by Ctrl-C once it has written a checkpoint. In README
blocks, "# ..." lines right after a command, or a "# ..." comment at the end
of its line, quote its output when they hold a digit; other "# ..." lines
are prose. In a python block, the comment of a print() line quotes what it
prints.

Tags say what the test cannot run or must know. They are written in a roff
comment line, `.\\" example: TAG, TAG`, which covers the commands after it to
the end of its block (or of the next block, when it stands outside one), or
in README in an HTML comment line, `<!-- example: TAG, TAG -->`, which covers
the next fenced block. Readers of the rendered page do not see them.
  gpu, hosts, make, slow, placeholder, bf16
                   the commands need a GPU, mpirun on named hosts, make, over
                   a minute here, files the documentation never defines, or
                   a CPU with bfloat16 instructions: they are skipped (the
                   slow ones run with DT_EXAMPLES=all, the bf16 ones where
                   `dtrain devices` lists bf16)
  exit N           the commands end with exit status N (by default 0)
  run              a man page block outside EXAMPLES holds commands to run
  text             the next block holds no commands (a part of a file)
  file NAME        the next block is the file NAME, written for the later
                   examples of the page
  output of COMMAND
                   the next block is what COMMAND prints (or writes to the
                   file it redirects to at its end): one more example
"""

import json
import re
import sys

PROGRAMS = {"dtrain", "mpirun", "srun", "make", "python3", "cut", "zcat",
            "find", "cat", "jq", "head", "man", "bats", "cp", "mv", "rm", "mkdir",
            "ls", "sort", "tail", "gzip"}
KINDS = ("gpu", "hosts", "make", "slow", "placeholder", "bf16")


class DocError(Exception):
    pass


# ---------------------------------------------------------------- tags

def no_tags():
    return {"kinds": [], "exit": None, "run": False, "text": False,
            "output_of": None, "file": None, "line": 0}


def parse_tags(text, where):
    """The tags of the text after `example:`, as a dict like no_tags()."""
    tags = no_tags()
    m = re.match(r"(.*?)\boutput of\s+(.+)$", text.strip())
    if m:
        tags["output_of"] = unroff(m.group(2).strip())
        text = m.group(1)
    for word in [w.strip() for w in text.split(",") if w.strip()]:
        parts = word.split()
        if len(parts) == 1 and parts[0] in KINDS:
            tags["kinds"].append(parts[0])
        elif len(parts) == 2 and parts[0] == "exit" and parts[1].isdigit():
            tags["exit"] = int(parts[1])
        elif parts in (["run"], ["text"]):
            tags[parts[0]] = True
        elif len(parts) == 2 and parts[0] == "file":
            tags["file"] = parts[1]
        else:
            raise DocError(f"{where}: unknown example tag '{word}'")
    return tags


def add_tags(old, new):
    """old with the tags of new added."""
    tags = dict(old)
    tags["kinds"] = old["kinds"] + new["kinds"]
    for key in ("exit", "output_of", "file", "line"):
        if new[key]:
            tags[key] = new[key]
    tags["run"] = old["run"] or new["run"]
    tags["text"] = old["text"] or new["text"]
    return tags


# ---------------------------------------------------------------- commands

def split_comment(line):
    """(code, comment) of a shell line: the comment starts at a '#' that
    begins a word outside quotes; comment is None without one."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip(), line[i + 1:].strip()
    return line, None


def is_command(code):
    words = code.split()
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]
    return bool(words) and words[0] in PROGRAMS


def continues(code):
    return code.rstrip().endswith(("\\", "|", "&&"))


def redirect_target(command):
    """The file a command's output goes to, when it ends with > FILE."""
    m = re.search(r"(?:^|\s)[12]?>\s*(\S+)\s*$", command)
    return m.group(1) if m else None


def new_example(doc, line, kind, command, tags):
    return {"file": doc, "line": line, "kind": kind, "command": command,
            "tags": list(tags["kinds"]), "exit": tags["exit"] or 0,
            "expect": [], "expect_line": 0, "interrupt": False,
            "output_file": redirect_target(command) if kind == "sh" else None,
            "modules": python_modules(command) if kind != "file" else []}


def python_modules(code):
    """The modules a python block, or a python3 -c '...' command, imports."""
    if not re.match(r"\s*(python3\b|import\b|from\b)", code):
        return []
    return sorted(set(re.findall(r"(?:^|[;'\"])\s*(?:from|import)\s+(\w+)", code, re.M)))


def quote_output(example, text, line):
    example["expect"].append(text)
    example["expect_line"] = example["expect_line"] or line


def block_commands(lines, doc, readme):
    """The examples of one code block; lines is a list of (line number,
    text, tags in force on that line)."""
    examples = []
    cur = None          # the last command
    joined = False      # the line before continues cur's command
    after = False       # no blank line since cur
    for n, text, tags in lines:
        if joined:
            code = split_comment(text)[0] if readme else text
            cur["command"] += "\n" + code
            cur["output_file"] = redirect_target(cur["command"])
            joined = continues(code)
            continue
        line = text.strip()
        if not line:
            after = False
            continue
        if line.startswith("$ "):
            line = line[2:]
        code, comment = split_comment(line) if readme else (line, None)
        if is_command(code):
            cur = new_example(doc, n, "sh", code, tags)
            if comment and re.search(r"\d", comment):
                quote_output(cur, comment, n)
            examples.append(cur)
            joined = continues(code)
            after = True
        elif readme and line.startswith("#"):
            if after and re.search(r"\d", line):
                quote_output(cur, line[1:].strip(), n)
            else:
                after = False
        elif after and line == "^C":
            cur["interrupt"] = True
        elif after:
            quote_output(cur, line, n)
        else:
            raise DocError(f"{doc}:{n}: '{line}' is neither a command nor the output of one")
    return examples


def tagged_block(tags, lines, doc):
    """The example of a block tagged `output of` or `file`."""
    if tags["output_of"]:
        ex = new_example(doc, tags["line"], "sh", tags["output_of"], tags)
        for n, text, _ in lines:
            quote_output(ex, text, n)
    else:
        ex = new_example(doc, tags["line"], "file", tags["file"], tags)
        ex["content"] = "".join(text + "\n" for _, text, _ in lines)
    return ex


def python_block(tags, lines, doc):
    code = "".join(text + "\n" for _, text, _ in lines)
    ex = new_example(doc, lines[0][0], "python", code, tags)
    for n, text, _ in lines:
        statement, comment = split_comment(text)
        if statement.lstrip().startswith("print(") and comment:
            quote_output(ex, comment, n)
    return ex


# ---------------------------------------------------------------- roff

ROFF_CHARS = {"aq": "'", "dq": '"', "mu": "\u00d7", "->": "\u2192", "em": "\u2014",
              "en": "\u2013", "bu": "\u2022", "lq": "\u201c", "rq": "\u201d"}


def unroff(text):
    """A line of an .EX block as the reader sees it."""
    text = re.sub(r"\\\[u([0-9A-Fa-f]{4})\]", lambda m: chr(int(m.group(1), 16)), text)
    text = re.sub(r"\\\((..)", lambda m: ROFF_CHARS.get(m.group(1), m.group(0)), text)
    text = re.sub(r"\\\[(\w+)\]", lambda m: ROFF_CHARS.get(m.group(1), m.group(0)), text)
    text = re.sub(r"\\f[BIRP]|\\f\[\w*\]", "", text)
    text = text.replace("\\&", "").replace("\\-", "-").replace("\\ ", " ")
    return text.replace("\\e", "\\")


def roff_examples(path, doc):
    examples = []
    section = ""
    pending = no_tags()     # tags for the next block
    block = None            # the lines of the open .EX block
    block_tags = tags = None    # the tags at its start, and from here on
    for n, raw in enumerate(open(path, encoding="utf-8").read().split("\n"), 1):
        m = re.match(r'^\.\\"\s*example:(.*)$', raw)
        if m:
            new = parse_tags(m.group(1), f"{doc}:{n}")
            new["line"] = n
            if block is None:
                pending = add_tags(pending, new)
            elif new["output_of"] or new["file"] or new["run"] or new["text"]:
                raise DocError(f"{doc}:{n}: this tag goes before a block, not inside one")
            else:
                tags = add_tags(tags, new)
        elif raw.startswith(".SH"):
            section = raw[3:].strip().strip('"')
        elif raw.startswith(".EX"):
            block, block_tags, tags, pending = [], pending, pending, no_tags()
        elif raw.startswith(".EE") and block is not None:
            if block_tags["output_of"] or block_tags["file"]:
                examples.append(tagged_block(block_tags, block, doc))
            elif (section == "EXAMPLES" or block_tags["run"]) and not block_tags["text"]:
                examples += block_commands(block, doc, readme=False)
            block = None
        elif block is not None and not raw.startswith((".", "'")):
            block.append((n, unroff(raw), tags))
    return examples


# ---------------------------------------------------------------- README

def starts_with_command(block):
    """Does an unmarked block begin with a command (else it shows output)?"""
    for _, text, _ in block:
        line = text.strip()
        if line and not line.startswith("#"):
            return is_command(split_comment(line[2:] if line.startswith("$ ") else line)[0])
    return False


def markdown_examples(path, doc):
    examples = []
    pending = no_tags()     # tags for the next block
    fence = None            # the open block's language
    for n, raw in enumerate(open(path, encoding="utf-8").read().split("\n"), 1):
        if fence is None:
            m = re.match(r"^<!--\s*example:(.*?)-->\s*$", raw)
            if m:
                pending = parse_tags(m.group(1), f"{doc}:{n}")
                pending["line"] = n
            m = re.match(r"^```\s*(\w*)\s*$", raw)
            if m:
                fence, block, tags, pending = m.group(1), [], pending, no_tags()
        elif not raw.startswith("```"):
            block.append((n, raw, tags))
        else:
            if tags["output_of"] or tags["file"]:
                examples.append(tagged_block(tags, block, doc))
            elif tags["text"] or not block:
                pass
            elif fence in ("sh", "bash", "shell") or (fence == "" and starts_with_command(block)):
                examples += block_commands(block, doc, readme=True)
            elif fence == "python":
                examples.append(python_block(tags, block, doc))
            fence = None
    if fence is not None:
        raise DocError(f"{doc}: the last fenced block is not closed")
    return examples


# ---------------------------------------------------------------- figures
#
# Every expected line must be matched, in order, by a line of the output
# with the same skeleton (the line with its numbers as <n>, its times such as
# 0s, 11ms/step as <t>, blanks squeezed), or for a JSON object by one with
# the same keys, whose numbers agree by the rule of their label (the word
# before the number, or the JSON key):
#   times and rates (seconds, samples_per_sec, ..._ms, GFLOP/s, %): ignored;
#   loss, mae, rmse: within 10%; accuracy: within 0.02; a probability (or
#   the last field of a CSV line): within 0.05, or 5% of a value past 1
#   (what a regression model predicts);
#   anything else (counts, shapes, epochs, versions, line:col): exactly.

NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+(?:\.\d+)?(?:e[-+]?\d+)?)(?![\w.]*\w)")
TIME = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:us|ms|s)\b")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
IGNORED = re.compile(r"^(ms|us|s|\w*seconds|\w*_ms|\w*_per_sec|\w*gflops|\w*fraction)$", re.I)


def rule(label, before="", after=""):
    """How a figure compares: 'ignore', 'exact', 'output', ('abs', d) or
    ('rel', r)."""
    label = label.lower()
    if IGNORED.search(label) or re.match(r"\s*(ms|samples/s|GFLOP/s|%)", after):
        return "ignore"
    if "loss" in label or label in ("mae", "rmse", "val_mae", "val_rmse"):
        return ("rel", 0.10)
    if "accuracy" in label:
        return ("abs", 0.02)
    if "probabilit" in label or label == "values" or (before.endswith(",") and not after.strip()):
        return "output"
    return "exact"


def figures(line):
    """(skeleton, [(number, rule)]) of a line."""
    line = TIME.sub("<t>", ANSI.sub("", line).strip())
    skeleton, found, pos = "", [], 0
    for m in NUMBER.finditer(line):
        words = re.findall(r"[A-Za-z_]+", line[:m.start()])
        found.append((m.group(0), rule(words[-1] if words else "", line[:m.start()], line[m.end():])))
        skeleton += line[pos:m.start()] + "<n>"
        pos = m.end()
    return re.sub(r"\s+", " ", skeleton + line[pos:]), found


# compare --counts-only: the trained figures (the rules with a tolerance)
# are not compared, for output of a shorter training than the quoted one.
COUNTS_ONLY = False


def agree(want, got, how):
    if how == "ignore" or (COUNTS_ONLY and how != "exact"):
        return True
    w, g = float(str(want).replace(",", "")), float(str(got).replace(",", ""))
    if how == "exact":
        return w == g
    if how == "output":     # a probability, or a regression model's value
        return abs(w - g) <= 0.05 if 0 <= w <= 1 else abs(w - g) <= 0.05 * abs(w)
    kind, d = how
    if kind == "abs":
        return abs(w - g) <= d + 1e-9
    return abs(w - g) <= d * abs(w) + 1e-9


def json_agree(want, got, key=""):
    """Do two JSON values agree, numbers by the rule of their key?"""
    if isinstance(want, dict):
        return isinstance(got, dict) and set(want) == set(got) and \
            all(json_agree(want[k], got[k], k) for k in want)
    if isinstance(want, list):
        return isinstance(got, list) and len(want) == len(got) and \
            all(json_agree(w, g, key) for w, g in zip(want, got))
    if isinstance(want, (bool, str)) or want is None:
        return want == got
    return isinstance(got, (int, float)) and not isinstance(got, bool) and \
        agree(want, got, rule(key))


def as_json(line):
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        return json.loads(line)
    except ValueError:
        return None


def expected_lines(text):
    """The lines to look for: blank and '...' lines left out, a JSON object
    wrapped over several lines joined into one."""
    lines, wrapped = [], ""
    for line in text.split("\n"):
        if wrapped:
            wrapped += " " + line.strip()
            if as_json(wrapped) is not None:
                lines.append(wrapped)
                wrapped = ""
        elif line.strip() in ("", "...", "\u2026"):
            continue
        elif line.strip().startswith("{") and as_json(line) is None:
            wrapped = line.strip()
        else:
            lines.append(line)
    return lines + ([wrapped] if wrapped else [])


def line_agrees(want, got):
    """(same form, same figures) of an expected and an output line."""
    wj = as_json(want)
    if isinstance(wj, dict):
        gj = as_json(got)
        same = isinstance(gj, dict) and set(wj) == set(gj)
        return same, same and json_agree(wj, gj)
    ws, wf = figures(want)
    gs, gf = figures(got)
    same = ws == gs
    return same, same and all(agree(w, g, how) for (w, how), (g, _) in zip(wf, gf))


def compare_lines(expected, actual):
    """The expected lines that the output does not show, each with the
    output line of its form that came nearest."""
    problems = []
    pos = 0
    actual = [ANSI.sub("", a).split("\r")[-1] for a in actual]
    for want in expected_lines(expected):
        near = None
        for i in range(pos, len(actual)):
            same, equal = line_agrees(want, actual[i])
            if equal:
                pos = i + 1
                break
            if same and near is None:
                near = actual[i]
        else:
            problems.append(f"quoted:  {want.strip()}\n"
                            f"printed: {near.strip() if near else '(no line of that form)'}")
    return problems


# ---------------------------------------------------------------- main

def main(argv):
    if len(argv) >= 2 and argv[1] == "list":
        # A document the extractor cannot read is reported and left out; the others are listed.
        failed = 0
        for path in argv[2:]:
            find = markdown_examples if path.endswith(".md") else roff_examples
            try:
                found = list(find(path, path))
            except DocError as e:
                print(f"doc_examples.py: {e}", file=sys.stderr)
                failed = 1
                continue
            for ex in found:
                print(json.dumps(ex, ensure_ascii=False))
        return failed
    global COUNTS_ONLY
    if len(argv) >= 2 and argv[1] == "compare" and "--counts-only" in argv:
        COUNTS_ONLY = True
        argv = [a for a in argv if a != "--counts-only"]
    if len(argv) in (4, 5) and argv[1] == "compare":
        expected = open(argv[2], encoding="utf-8").read()
        actual = open(argv[3], encoding="utf-8", errors="replace").read().split("\n")
        problems = compare_lines(expected, actual)
        where = argv[4] + ": " if len(argv) == 5 else ""
        for p in problems:
            print(f"{where}the output does not show the quoted figures:\n{p}")
        return 1 if problems else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
