"""The shape docs/architecture.md describes, checked on the source: no two modules import each
other (directly or round a longer loop, imports inside functions included), and the command line
stays thin."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "hmde"


def module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def imported_modules(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """hmde modules that ``name`` imports anywhere in its file. ``from . import e5`` names the
    submodule e5, not the package (whose __init__ runs on any import and is no dependency)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            submodules = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known]
            found.update(submodules if len(submodules) == len(node.names) else [target, *submodules])
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m in known and m != name}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_finds_a_loop_of_three_and_nothing_in_a_tree():
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_no_module_of_hmde_imports_itself_round_a_loop():
    known = module_names()
    graph = {name: imported_modules(name, path, known) for name, path in known.items()}
    assert graph["hmde.encoders.hierarchical"]  # the parser sees imports at all
    assert import_cycles(graph) == []


CLI_MODULE_LINES = 270  # "about 250": the command line parses flags and calls the library


def test_command_line_modules_stay_thin():
    long = {p.name: n for p in (PACKAGE / "cli").glob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > CLI_MODULE_LINES}
    assert long == {}


def test_the_library_never_imports_the_command_line():
    known = module_names()
    upward = {name: sorted(m for m in imported_modules(name, path, known) if m.startswith("hmde.cli"))
              for name, path in known.items() if not name.startswith("hmde.cli")}
    assert upward.pop("hmde.__main__") == ["hmde.cli.main"]  # `python -m hmde`: the command's entry, like the script
    assert {name: mods for name, mods in upward.items() if mods} == {}


TOP_LEVEL_MODULES = {"__init__.py", "__main__.py", "errors.py", "version.py", "st_router.py"}


def namespace_readers(source: str) -> list[int]:
    """Lines where a function reads attributes of a parameter named ``args`` or ``namespace`` (what the
    command line's parsed flags are called), or where argparse is imported."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(n.split(".")[0] == "argparse" for n in names):
                lines.append(node.lineno)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            params = {a.arg for a in [*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs]}
            for inner in ast.walk(node):
                if isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name) and \
                        inner.value.id in params & {"args", "namespace"}:
                    lines.append(inner.lineno)
                elif isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and \
                        inner.func.id in ("getattr", "vars") and inner.args and \
                        isinstance(inner.args[0], ast.Name) and inner.args[0].id in params & {"args", "namespace"}:
                    lines.append(inner.lineno)
    return sorted(set(lines))


def test_the_namespace_finder_sees_flags_read_and_argparse_imported():
    source = ("import argparse\ndef f(args):\n    return args.model\ndef g(args):\n    return getattr(args, 'x')\n"
              "def h(model):\n    return model.name\n")
    assert namespace_readers(source) == [1, 3, 5]


def test_no_module_outside_the_command_line_takes_parsed_flags():
    found = {str(p.relative_to(PACKAGE)): lines for p in sorted(PACKAGE.rglob("*.py"))
             if "cli" not in p.relative_to(PACKAGE).parts and (lines := namespace_readers(p.read_text(encoding="utf-8")))}
    assert found == {}


def test_the_top_of_the_package_holds_packages_and_a_handful_of_modules():
    assert {p.name for p in PACKAGE.glob("*.py")} == TOP_LEVEL_MODULES
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and doc.strip(), f"{init.parent.name}/__init__.py says in a docstring what the package holds"


def test_the_public_imports_of_before_still_work():
    import importlib

    import hmde
    from hmde.methods import DocumentVectorizer

    assert hmde.HierarchicalEncoder.__module__ == "hmde.encoders.hierarchical" and callable(hmde.sentence_transformer)
    assert DocumentVectorizer is hmde.DocumentVectorizer
    module, _, name = "hmde.st_router.HmdeDocumentModule".rpartition(".")  # the class path saved folders name
    assert isinstance(getattr(importlib.import_module(module), name), type)


def test_every_store_provides_the_protocol_and_no_index_module_grows_past_400_lines():
    """Issue 61: the ranking lives above the stores, each store is a module of its own that provides what
    hmde.index.store_protocol names (nothing of the ranking), and hmde/index stays small modules with one job."""
    import inspect

    from hmde.index.local_store import LocalStore
    from hmde.index.milvus_store import MilvusIndex
    from hmde.index.store_protocol import DocumentStore

    wanted = {n for n, v in vars(DocumentStore).items() if inspect.isfunction(v) and not n.startswith("_")}
    wanted |= set(DocumentStore.__annotations__)
    assert {"nearest_documents", "nearest_sentences", "select", "records", "language_basis"} <= wanted
    for store in (LocalStore, MilvusIndex):
        source = inspect.getsource(store)
        missing = [n for n in wanted if not hasattr(store, n) and f"self.{n} =" not in source and f"self.{n}," not in source]
        assert not missing, (store.__name__, missing)
        assert "calibrate(" not in source and "reciprocal_rank_fusion" not in source  # the ranking's, not a store's
    long = {p.name: n for p in (PACKAGE / "index").glob("*.py") if (n := len(p.read_text().splitlines())) > 410}
    assert not long, long
