"""Reading profile.json back (docs/profile-format.md, "Validation").

Everything the planner, explain and the graph read is checked here, once, at
load, so that they can trust a loaded profile. Two passes, both linear:

1. the schema, docs/profile.schema.json (JSON Schema draft 4): presence,
   types and ranges of every field, validated by fastjsonschema, which
   compiles the schema into Python code (jsonschema itself took 5.8 s on a
   6,000-context profile that this takes 0.4 s over);
2. what a schema cannot say, below: ids in order, references to ids that
   exist, graph edges between the graph's nodes, each context in one family."""

import json
import sys

import fastjsonschema

from cohort.errors import CohortError
from cohort.paths import profile_schema

FORMAT = "cohort-profile"
READS = (1, 2, 3)


class Corrupt(Exception):
    """What is wrong with a profile's content (the message names the field)."""


def _no_constant(name):
    raise Corrupt(f"{name}, which JSON does not allow")


def _decode(raw):
    """The JSON value of a profile file's bytes. Raises Corrupt (why not)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Corrupt(f"not UTF-8 text (byte {e.start})") from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise Corrupt(f"bad JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except ValueError:
        # Python's int-string conversion limit (sys.set_int_max_str_digits,
        # 4300 digits by default): no count in a profile comes near it
        limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
        raise Corrupt(f"a number of more than {limit} digits") from None
    except RecursionError:
        raise Corrupt("nested too deeply") from None


def _show(v):
    """A value, briefly, for a message."""
    if v is None or isinstance(v, bool):
        return json.dumps(v)
    if type(v) is int:
        return str(v) if abs(v) < 10 ** 24 else f"a number of about {int(v.bit_length() * 0.30103)} digits"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return ascii(v) if len(v) <= 40 else ascii(v[:37]) + "..."
    if isinstance(v, list):
        return "[]" if not v else "a list"
    return "{}" if not v else "an object"


# ---- pass 1: the schema -----------------------------------------------------

_validators = {}   # version -> compiled validator

TYPE_NAMES = {"object": "an object", "array": "a list", "string": "a string", "integer": "an integer",
              "number": "a number", "boolean": "true or false", "null": "null"}


def _inlined(node, definitions, within=()):
    """A schema node with every `$ref` to a definition replaced by the
    definition itself (draft 4: a `$ref`'s siblings are ignored), except
    one that refers back to a definition it is inside. fastjsonschema calls
    a referenced definition as a function, building the name of the value it
    checks before each call (`"...contexts[{i}].allocations".format(**locals())`),
    for every element of every list: on cppcheck's profile (93 MB, 2.4 M
    counts) validating took 22.1 s with the references and 3.2 s inlined.
    The verdicts are the same, and so are the paths and descriptions that
    _schema_error words them with."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/definitions/"):
            name = ref[len("#/definitions/"):]
            if name in within or name not in definitions:
                return node
            return _inlined(definitions[name], definitions, (*within, name))
        return {k: _inlined(v, definitions, within) for k, v in node.items()}
    if isinstance(node, list):
        return [_inlined(v, definitions, within) for v in node]
    return node


def _validator(version):
    """The schema's definition for this version ("v1", "v2"), compiled once."""
    if version not in _validators:
        path = profile_schema()
        try:
            schema = json.loads(path.read_text())
            definitions = schema["definitions"]
            _validators[version] = fastjsonschema.compile({
                "$schema": schema["$schema"], "definitions": definitions,
                **_inlined({"$ref": f"#/definitions/v{version}"}, definitions)})
        except (OSError, ValueError, KeyError, fastjsonschema.JsonSchemaDefinitionException) as e:
            raise CohortError(f"{path}: Cohort's profile schema is unusable ({e}); reinstall Cohort") from None
    return _validators[version]


def _where(data, path):
    """fastjsonschema's path (['data', 'contexts', '3', 'sites']) as
    contexts[3].sites; the document itself is "profile"."""
    out, node = "", data
    for key in path[1:]:
        if isinstance(node, list):
            node = node[int(key)]
            out += f"[{key}]"
        else:
            node = node[key]
            out += f".{key}" if out else key
    return out or "profile"


def _schema_error(data, e):
    """One line for a schema violation: where, the value, what it should be."""
    where = _where(data, e.path)
    if e.rule == "required":
        missing = next(k for k in e.rule_definition if k not in e.value)
        return f"{where}: no '{missing}'"
    want = e.definition.get("description")
    if want is None and e.rule == "type":
        types = e.rule_definition if isinstance(e.rule_definition, list) else [e.rule_definition]
        want = " or ".join(TYPE_NAMES.get(t, t) for t in types)
    if want is None:   # a rule with no words of ours: the library's, without its "data..." prefix
        return f"{where}: {_show(e.value)}: {e.message.split(' ', 1)[-1]}"
    return f"{where}: {_show(e.value)}, not {want}"


# ---- pass 2: cross-references -----------------------------------------------

def _in_order(items, key):
    """Each record's id is its index."""
    for i, item in enumerate(items):
        if item["id"] != i:
            raise Corrupt(f"{key}[{i}].id: {_show(item['id'])} (ids must be 0, 1, 2, ... in order)")


def _ids(items, n, where, what):
    """Integer ids (the schema said so) below n; linear, with builtins on the good path."""
    if items and max(items) >= n:
        i, x = next((i, x) for i, x in enumerate(items) if x >= n)
        raise Corrupt(f"{where}[{i}]: {_show(x)} is no {what} id (the profile has {n} {what}s)")
    return items


def _graph(g, key, n, what):
    """graph or family_graph: distinct nodes below n, edges [x, y, w]
    between the graph's nodes with x <= y, each pair once."""
    nodes = _ids(g["nodes"], n, f"{key}.nodes", what)
    kept = set(nodes)
    if len(kept) != len(nodes):
        raise Corrupt(f"{key}.nodes: a {what} is listed twice")
    pairs = set()
    for i, (x, y, _) in enumerate(g["edges"]):
        for v in (x, y):
            if v not in kept:
                raise Corrupt(f"{key}.edges[{i}]: {_show(v)} is not one of the graph's nodes")
        if x > y:
            raise Corrupt(f"{key}.edges[{i}]: [{x}, {y}, ...] is not in order (x <= y)")
        if (x, y) in pairs:
            raise Corrupt(f"{key}.edges[{i}]: a second edge between {x} and {y}")
        pairs.add((x, y))


def _references(data):
    modules, sites, contexts = data["modules"], data["sites"], data["contexts"]
    for key in ("modules", "sites", "contexts"):
        _in_order(data[key], key)
    for i, s in enumerate(sites):
        if s["module"] >= len(modules):
            raise Corrupt(f"sites[{i}].module: {s['module']} is no module id "
                          f"(the profile has {len(modules)} modules)")
    for i, c in enumerate(contexts):
        _ids(c["sites"], len(sites), f"contexts[{i}].sites", "site")
    _graph(data["graph"], "graph", len(contexts), "context")
    near = data["graph"].get("near")
    if near is not None:
        if len(near) != len(data["graph"]["edges"]):
            raise Corrupt(f"graph.near: {len(near)} weights for {len(data['graph']['edges'])} edges")
        for i, (n, (_, _, w)) in enumerate(zip(near, data["graph"]["edges"])):
            if n > 64 * w:
                raise Corrupt(f"graph.near[{i}]: {n} 64ths for an edge of weight {w}")
    if data["graph"]["dropped_contexts"] > len(contexts):
        raise Corrupt(f"graph.dropped_contexts: {_show(data['graph']['dropped_contexts'])}, "
                      f"more than the profile's {len(contexts)} contexts")

    if data.get("families") is None:   # version 1 without families
        return
    fams = data["families"]
    _in_order(fams, "families")
    if "family_graph" not in data:
        raise Corrupt("profile: no 'family_graph'")
    owner = [None] * len(contexts)
    for i, f in enumerate(fams):
        _ids(f["sites"], len(sites), f"families[{i}].sites", "site")
        for c in _ids(f["contexts"], len(contexts), f"families[{i}].contexts", "context"):
            if owner[c] is not None:
                raise Corrupt(f"families[{i}].contexts: context {c} is also in family {owner[c]}")
            owner[c] = i
    for i, c in enumerate(contexts):
        if owner[i] is None:
            raise Corrupt(f"contexts[{i}]: in no family")
        if c.get("family") != owner[i]:
            raise Corrupt(f"contexts[{i}].family: {_show(c.get('family'))}, but families[{owner[i]}] holds it")
    _graph(data["family_graph"], "family_graph", len(fams), "family")
    ds = data.get("ds_graph")
    if ds is not None:   # version 3
        for i, (x, _off, y, _n) in enumerate(ds["edges"]):
            _ids([x, y], len(contexts), f"ds_graph.edges[{i}]", "context")
        _ids(ds["array_like"], len(contexts), "ds_graph.array_like", "context")
    hs = data.get("hot_streams")
    if hs is not None:   # cohort profile --trace
        for i, st in enumerate(hs["sets"]):
            _ids(st["contexts"], len(contexts), f"hot_streams.sets[{i}].contexts", "context")
    for layout, pairs in ((data.get("rest_layouts") or {}).get("beside") or {}).items():   # raw version 6
        for i, (c, n, _k) in enumerate(pairs):
            _ids([c, n], len(contexts), f"rest_layouts.beside.{layout}[{i}]", "context")


def check_profile(data):
    """Raises Corrupt naming the first field that is missing, of the wrong
    type, out of range, or names something that is not there. data is a
    dict whose version is one of READS."""
    try:
        _validator(data["version"])(data)
    except fastjsonschema.JsonSchemaValueException as e:
        raise Corrupt(_schema_error(data, e)) from None
    _references(data)


def dumps(data):
    """profile.json's text: its top level and its sections a key per line,
    and each record of a section's lists (a context, a site, a graph edge)
    on a line of its own. json.dumps(indent=...) writes the same value in
    Python's own encoder, the C one being for compact output only: 8.8 s
    for cppcheck's 93 MB profile, where this takes about 1 s. One encoder
    serves every record: json.dumps with separators makes one per call."""
    encode = json.JSONEncoder(separators=(", ", ": ")).encode

    def lines(value, depth):
        pad = " " * (depth + 1)
        if isinstance(value, dict) and value and depth <= 1:
            items = (f"{pad}{json.dumps(k)}: {lines(v, depth + 1)}" for k, v in value.items())
            return "{\n" + ",\n".join(items) + "\n" + " " * depth + "}"
        if isinstance(value, list) and value and depth <= 2 and isinstance(value[0], (dict, list)):
            return "[\n" + ",\n".join(pad + lines(v, depth + 1) for v in value) + "\n" + " " * depth + "]"
        return encode(value)
    return lines(data, 0) + "\n"


def load_profile(path):
    """A profile.json, checked (check_profile). Raises CohortError with one
    line `PATH: what is wrong`."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise CohortError(f"{path}: no such profile") from None
    except OSError as e:
        raise CohortError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        data = _decode(raw)
    except Corrupt as e:
        raise CohortError(f"{path}: not a profile: {e}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CohortError(f"{path}: not a Cohort profile")
    version = data.get("version")
    if type(version) is not int or version not in READS:
        raise CohortError(f"{path}: profile version {_show(version)} is not supported "
                          f"(this Cohort reads versions {READS[0]} to {READS[-1]})")
    try:
        check_profile(data)
    except Corrupt as e:
        raise CohortError(f"{path}: corrupt profile: {e}") from None
    return data
