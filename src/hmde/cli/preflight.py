"""Checks a command makes before any expensive work (loading models, encoding).

Everything here is known from the input file, the arguments and the output's place;
finding it after an hour of encoding would waste the hour. Each check raises a one-line
:class:`~hmde.errors.HmdeError` naming the file, line and field or the option to use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

from ..errors import HmdeError, InputError
from ..io.documents import DocumentRecord, check_unique_ids
from ..ground.output_dirs import check_writable_parent


def check_records(records: Iterable[DocumentRecord], args) -> dict[str, int | None]:
    """Ids unique and writable as one line each (``OUT.ids.txt``, TSV outputs), checked as the
    records stream by (a first pass over a large input keeps no text); returns each id's line."""

    def one_line(rs):
        for r in rs:
            if "\n" in r.doc_id or "\r" in r.doc_id:
                raise InputError(f"the id {r.doc_id!r} contains a line break", str(r.source or args.input), r.line,
                                 args.id_field)
            yield r

    return check_unique_ids(one_line(records), args.input, args.id_field)


def check_lawdr_inputs(records: Sequence[DocumentRecord], langs: Sequence[str | None], args,
                       have_stats: bool) -> None:
    """LAWDR fitted on the input needs every document's language, and, to choose ``m`` by
    classifying languages, at least two of them."""
    if have_stats:
        return
    for r, lang in zip(records, langs):
        if not lang:
            raise InputError("LAWDR needs every document's language (its language directions are per language): "
                             "the field is missing or empty; give it, or --lang for all", str(r.source or args.input), r.line,
                             args.lang_field or "lang")
    distinct = sorted(set(langs))
    if len(distinct) < 2 and getattr(args, "lawdr_m", None) is None:
        raise HmdeError(f"{args.input}: LAWDR chooses the number of language directions m by classifying languages, "
                        f"and the input holds one ('{distinct[0]}'): give --lawdr-m (the paper's m is 1 for "
                        "most encoders) or --lawdr-stats fitted on several languages")


def counting_chars(records, args):
    """The records, their texts' characters summed into ``args.input_chars`` as they pass (memory planning)."""
    args.input_chars = 0
    for r in records:
        args.input_chars += len(r.text) if isinstance(r.text, str) else sum(len(s) for s in r.text)
        yield r


def check_memory(args, meta, count: int, existing=None) -> None:
    """A flat index whose search would not fit this machine's memory, refused before the model embeds anything
    (:func:`hmde.index.memory_plan.check_fits`; an add counts the sentences the index holds)."""
    from ..index.memory_plan import check_fits, sentence_bytes

    if meta.store or (existing is not None and existing.meta.store):
        return
    held = len(existing.sentence_vectors) + existing.meta.count if existing is not None else 0
    check_fits(meta.index_type, bool(meta.multi_vector), count, getattr(args, "input_chars", 0), meta.dim,
               meta.pq_m or 96, held, str(args.input), sentence_bytes(meta))


def check_index_size(count: int, args) -> None:
    """IVF indexes are trained on the documents themselves: they need enough of them."""
    if args.type not in ("ivf", "ivfpq") or args.add:
        return
    from ..index.store import PQ_BITS

    need = max(args.ivf_lists, 2**PQ_BITS if args.type == "ivfpq" else 0)
    if count < need:
        raise HmdeError(f"{args.input}: an {args.type.upper()} index with {args.ivf_lists} lists needs at least {need} "
                        f"documents to train on, the input holds {count}: lower --ivf-lists or use --type flat")


def check_pq(dim: int, args) -> None:
    if args.type == "ivfpq" and (args.pq_m < 1 or dim % args.pq_m):
        raise HmdeError(f"--pq-m must divide the model's dimension {dim}, got {args.pq_m}")


def check_output_file(output: str | Path, inputs: tuple = (), overwrite: bool | None = None) -> None:
    """The output's folder must be writable (a read-only place is found now, not after encoding), and
    the output must not be one of the command's ``inputs`` (``align en.tsv fr.tsv -o en.tsv`` replaced
    its own input). ``overwrite`` (vector files): an existing file that hmde did not write is replaced only with
    it (:func:`hmde.ground.output_dirs.check_replaceable_file`)."""
    from ..ground.output_dirs import check_not_an_input, check_replaceable_file

    check_writable_parent(output)
    if Path(output).is_dir():
        raise HmdeError(f"{output}: is a folder; name a file")
    if overwrite is not None:
        check_replaceable_file(output, overwrite)
    check_not_an_input({"output": [Path(output)]},
                       {f"input {i}": Path(given) for i, given in enumerate(inputs, 1) if given})


# the options whose values a command writes; every other option naming an existing path is an input
OUTPUT_OPTIONS = ("output", "run", "run_output", "plot", "vectors_dir", "sentences")


def written_files(dest: str, value: str) -> list[Path]:
    """The files hmde writes for an output option: the path, and the sidecars written beside it."""
    path = Path(value)
    files = [path]
    if dest == "output" and value.endswith(".npy"):
        from ..io.vector_files import ids_path_for

        files.append(ids_path_for(path))
    if dest == "output" and value.endswith(".parquet"):
        from ..pretraining.pairs import documents_path

        files.append(documents_path(path))
    return files


def _is_path(value: str) -> bool:
    """Whether a flag's value names an existing file or folder (a long list of codes is not a path: stat
    refused it with 'File name too long')."""
    if len(value) >= 4096 or "\n" in value:
        return False
    try:
        return Path(value).exists()
    except OSError:
        return False


def check_outputs_are_not_inputs(args) -> None:
    """Before a command does anything: none of its outputs replaces one of its inputs
    (:func:`hmde.ground.output_dirs.check_not_an_input`), whatever the command."""
    from ..ground.output_dirs import check_not_an_input

    outputs, inputs = {}, {}
    for dest, value in vars(args).items():
        if dest in ("func", "model") or value is None:
            continue
        values = value if isinstance(value, list) else [value]
        if not all(isinstance(v, str) and v for v in values):
            continue
        flag = dest.replace("_", "-")
        if dest in OUTPUT_OPTIONS:
            outputs[flag] = [f for v in values for f in written_files(dest, v)]
        else:
            for i, v in enumerate(values):
                if _is_path(v):
                    inputs[flag if len(values) == 1 else f"{flag} #{i + 1}"] = Path(v)
    model = getattr(args, "model", None)
    if isinstance(model, str) and _is_path(model):
        inputs["MODEL"] = Path(model)
    check_not_an_input(outputs, inputs)
