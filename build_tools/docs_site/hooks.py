"""MkDocs hooks for the documentation site (``mkdocs.yml``: ``hooks``).

- A line ``<!-- flags: ppo.py -->`` in a page becomes the table of that trainer's flags, generated from its
  ``Args`` dataclass at build time: the flags ``--help`` lists (tyro writes each field ``--field-name``, a bool
  ``--name`` turned off by ``--no-name``), their defaults and their help (the field's docstring, as tyro reads
  it). The table cannot drift from the code; ``tests/docs/test_docs_flags.py`` checks it against ``--help``.
- The images under ``results/`` (the learning curves) join the site at ``results/<folder>/<file>``, so a page
  links them as ``results/...`` from the site's root (``../results/pong_5min/curves.png`` from a trainer page)
  instead of keeping copies in ``docs/``.
"""

import ast
import dataclasses
import importlib.util
import inspect
import re
import sys
import textwrap
import typing
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
MARKER = re.compile(r"^<!-- flags: (\w+\.py) -->$", re.MULTILINE)
RESULT_FILES = ("*.png", "*.svg")


def field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring (the string literal right after it), the subclass's winning."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__[:-1]):  # base classes first
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body
        for node, after in zip(body, body[1:]):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):  # fmt: skip
                docs[node.target.id] = " ".join(inspect.cleandoc(after.value.value).split())
    return docs


def type_name(annotation) -> str:
    """``Optional[float]`` -> ``float or None``; ``Literal["a", "b"]`` -> ``"a" | "b"``; a class -> its name."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Union:
        named = [type_name(a) for a in args if a is not type(None)]
        return " | ".join(named) + (" or None" if type(None) in args else "")
    if origin is typing.Literal:
        return " | ".join(f'"{a}"' if isinstance(a, str) else str(a) for a in args)
    if origin in (tuple, list):
        return f"{origin.__name__} of {', '.join(type_name(a) for a in args if a is not Ellipsis)}"
    return getattr(annotation, "__name__", str(annotation))


@lru_cache(maxsize=None)
def trainer_args(script: str) -> type:
    """``scripts/<script>``'s ``Args``, the script imported as a module (``scripts/`` importable, as it runs)."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    spec = importlib.util.spec_from_file_location(f"_docs_{Path(script).stem}", SCRIPTS / script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module.Args


def flag_rows(script: str) -> list[tuple[str, str, str, str]]:
    """``(flag, type, default, help)`` for every field of the script's ``Args``, in ``--help``'s order."""
    cls = trainer_args(script)
    hints, docs = typing.get_type_hints(cls), field_docs(cls)
    rows = []
    for f in dataclasses.fields(cls):
        flag = "--" + f.name.replace("_", "-")  # a bool's opposite, --no-<name>, is said once above the table
        kind = hints[f.name]
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if isinstance(default, (tuple, list)):  # as --help writes it: the items, space-separated
            shown = " ".join(map(str, default))
        else:
            shown = repr(default) if isinstance(default, str) else str(default)
        rows.append((flag, type_name(kind), shown, docs.get(f.name, "")))
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _table(rows: list[tuple[str, str, str, str]]) -> list[str]:
    lines = ["| flag | type | default | what it does |", "| --- | --- | --- | --- |"]
    return lines + [f"| `{flag}` | {_cell(kind)} | `{_cell(default)}` | {_cell(help_)} |" for flag, kind, default, help_
                    in rows]  # fmt: skip


def flags_table(script: str) -> str:
    """The markdown of ``script``'s flags: a table of the algorithm's (its ``Args`` beyond ``RunArgs``), then one of
    the run layer's (``RunArgs``: every trainer has them), with this trainer's defaults."""
    from rlfast.algos.runargs import RunArgs

    run_fields = {f.name for f in dataclasses.fields(RunArgs)}
    rows = flag_rows(script)
    own = [r for r, f in zip(rows, dataclasses.fields(trainer_args(script))) if f.name not in run_fields]
    run = [r for r, f in zip(rows, dataclasses.fields(trainer_args(script))) if f.name in run_fields]
    own_title = "**The algorithm's flags** (a bool flag `--x` is turned off with `--no-x`)"
    run_title = ("**The run's flags**: the task, its length and envs, checkpoints, devices (the run layer's: every "
                 "trainer has them, with its own defaults)")  # fmt: skip
    return "\n".join([own_title, "", *_table(own), "", run_title, "", *_table(run)])


def on_page_markdown(markdown: str, page, config, files) -> str:
    return MARKER.sub(lambda m: flags_table(m.group(1)), markdown)


def on_files(files, config):
    from mkdocs.structure.files import File

    for pattern in RESULT_FILES:
        for path in sorted((ROOT / "results").rglob(pattern)):
            rel = path.relative_to(ROOT).as_posix()
            if files.get_file_from_path(rel) is None:
                files.append(File(rel, str(ROOT), config["site_dir"], config["use_directory_urls"]))
    return files
