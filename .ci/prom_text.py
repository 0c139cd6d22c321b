"""The Prometheus text format read two ways, for `stats_side_by_side.py`:
literally (every line, labels in printed order, `# TYPE` lines, the
family each sample belongs to) and by `prometheus_client`'s parser; and
both reads of one scrape side by side (`View`)."""
import re

from prometheus_client.parser import text_string_to_metric_families

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
SAMPLE = re.compile(r"^(" + NAME + r")(?:\{(.*)\})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\.)*)"')
TYPE_RANK = {"counter": 0, "gauge": 1, "histogram": 2}
SUFFIXES = {"counter": [""], "gauge": [""], "histogram": ["_bucket", "_sum", "_count"],
            "summary": ["", "_sum", "_count"]}


def parse_labels(text):
    """[(name, value), ...] in printed order (values unescaped), or None
    when `text` is not exactly a comma-separated list of name="value"."""
    out, pos = [], 0
    while pos < len(text):
        m = LABEL.match(text, pos)
        if not m:
            return None
        v = re.sub(r"\\(.)", lambda x: {"n": "\n"}.get(x.group(1), x.group(1)), m.group(2))
        out.append((m.group(1), v))
        pos = m.end()
        if pos < len(text):
            if text[pos] != ",":
                return None
            pos += 1
            if pos == len(text):
                return None  # a trailing comma
    return out


def split_key(key):
    """A printed series (`name{labels}`) -> (name, label list)."""
    m = SAMPLE.match(key + " 0")
    return m.group(1), parse_labels(m.group(2) or "")


class LineParse:
    """The literal view of an exposition: series as printed (key = the line
    up to the value), the `# TYPE` lines in order, and what the format
    checks need."""

    def __init__(self, text):
        self.samples = {}  # printed key -> value
        self.by_labels = {}  # (name, frozenset(labels)) -> printed key
        self.types = []  # [(family, type)] in order
        self.type_of = {}
        self.help = []
        self.comments = []
        self.blank = 0
        self.bad = []
        self.untyped = []
        self.dup_types = []
        self.dup_series = []
        self.no_braces = []
        self.final_newline = text.endswith("\n")
        family, ftype, allowed = None, None, []
        lines = text.split("\n")
        if self.final_newline:
            lines.pop()
        for line in lines:
            if line == "":
                self.blank += 1
            elif line.startswith("# TYPE "):
                parts = line.split(" ")
                if len(parts) != 4 or not re.fullmatch(NAME, parts[2]):
                    self.bad.append(line)
                    family, ftype, allowed = None, None, []
                    continue
                family, ftype = parts[2], parts[3]
                if family in self.type_of:
                    self.dup_types.append(family)
                self.type_of[family] = ftype
                self.types.append((family, ftype))
                allowed = [family + s for s in SUFFIXES.get(ftype, [""])]
            elif line.startswith("# HELP "):
                self.help.append(line)
            elif line.startswith("#"):
                self.comments.append(line)
            else:
                m = SAMPLE.match(line)
                labels = m and parse_labels(m.group(2) or "")
                try:
                    value = float(m.group(3)) if m else None
                except ValueError:
                    value = None
                if not m or labels is None or value is None:
                    self.bad.append(line)
                    continue
                name = m.group(1)
                key = line.rsplit(" ", 1)[0]
                if name not in allowed:
                    self.untyped.append(name)
                if m.group(2) is None:
                    self.no_braces.append(key)
                if key in self.samples:
                    self.dup_series.append(key)
                self.samples[key] = value
                self.by_labels[(name, frozenset(labels))] = key

    def block_order(self):
        """'ok' or the first family that breaks counters-gauges-histograms."""
        rank, prev = -1, None
        for fam, typ in self.types:
            r = TYPE_RANK.get(typ)
            if r is None:
                return f"{fam} is a {typ}, neither counter, gauge nor histogram"
            if r < rank:
                return f"{typ} {fam} after {self.type_of[prev]} {prev}"
            rank, prev = r, fam
        return "ok"


def pc_parse(text, lp):
    """prometheus_client's view: (name, frozenset(labels)) -> value, names
    as printed. The parser renames a counter's samples (`x` -> `x_total`)
    and its family (`x_total` -> `x`); the original name is taken from the
    `# TYPE` line the family came from, matched in order."""
    out = {}
    ptr = 0
    for f in text_string_to_metric_families(text):
        orig = None
        for j in range(ptr, len(lp.types)):
            n, t = lp.types[j]
            munged = n[:-6] if t == "counter" and n.endswith("_total") else n
            if t == f.type and munged == f.name:
                orig, ptr = n, j + 1
                break
        for s in f.samples:
            name = s.name
            if f.type == "counter" and orig is not None and not orig.endswith("_total"):
                name = name.removesuffix("_total")
            out[(name, frozenset(s.labels.items()))] = s.value
    return out


class View:
    """Both parses of one scrape."""

    def __init__(self, status, ctype, text):
        self.status, self.ctype, self.text = status, ctype, text
        self.lp = LineParse(text)
        try:
            self.pc = pc_parse(text, self.lp)
            self.pc_error = None
        except Exception as e:  # noqa: BLE001 - the parser's refusal is the finding
            self.pc, self.pc_error = {}, f"{type(e).__name__}: {e}"

    def value(self, key):
        """(value, how it is printed) of a compared series: by name and
        labels via prometheus_client, and literally via the line parser."""
        name, labels = split_key(key)
        lkey = frozenset(labels)
        return self.pc.get((name, lkey)), self.lp.samples.get(key), self.lp.by_labels.get((name, lkey))
