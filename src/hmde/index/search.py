"""An index opened with its model (:class:`Index`): searched with queries (each through the index's lower
encoder, the CLIR protocol, then :meth:`DocumentIndex.search`: dense, hybrid with BM25, or multi-vector), and
written (create, add, upsert, delete, compact) through the one write path of :mod:`hmde.index.builder`."""

from __future__ import annotations

import dataclasses

from ..files.index_files import FileWrites
from ..text.coverage import languages_of, warn_uncovered
from ..errors import HmdeError
from ..encoders.backends import for_index, for_job
from ..encoders.backends import recorded as recorded_backend
from ..encoders.model_loading import load_model
from .multivector import DEFAULT_DOC_WEIGHT, DEFAULT_TOP_SENTENCES
from .search_checks import (_checked_records, _ids, check_batch_size, check_filter,  # noqa: F401  (their names here)
                            check_index_request, check_request, check_top_k, query_lang_problem)


class Index(FileWrites):
    """An index opened once with the model it was built with, searched any number of times: what
    `hmde search` does, from Python (and the server), without loading the model per call.

    ``Index.open("my-index").search(["wer hat das Finale gewonnen?"])`` -> one list of
    :class:`~hmde.index.store.SearchHit` per query, best first, as `hmde search` ranks them.

    It is also written: ``Index.create(path, documents, model)``, then ``add``, ``upsert`` (a known id is
    replaced), ``delete``, ``compact`` and ``info``, each one commit, as `hmde index add|upsert|delete|compact`
    and the server's write routes make them. A search sees the newest committed version, whoever wrote it.

    One ``Index`` is shared by any number of threads and asyncio tasks (issue 92): each call reads one committed
    version to its end (:mod:`hmde.index.snapshots`), writes are serialised by the index's writer lock (across
    processes too), and the model runs on one thread, where concurrent searches' queries are embedded together
    (:mod:`hmde.encoders.model_thread`).
    """

    def __init__(self, index, name: str, kind: str, model, device: str):
        from ..encoders.model_thread import GatheredCalls
        from .snapshots import Snapshots
        from .store import DocumentIndex

        self.model_name, self.kind, self.model, self.device = name, kind, model, device
        self._snapshots = Snapshots(index, DocumentIndex.open)
        self._queries = GatheredCalls(self._embed_queries)

    @classmethod
    def create(cls, path: str, documents=(), model: str | None = None, device: str = "auto", overwrite: bool = False,
               batch_size: int = 64, threads: int | None = None, files=(), **settings) -> "Index":
        """A new index at ``path`` holding ``documents`` (mappings with ``doc_id``, ``text`` and an optional
        ``lang``, or :class:`~hmde.io.documents.DocumentRecord`), embedded with ``model`` (default: hmde's).
        ``settings`` are :class:`~hmde.index.builder.IndexSettings`' fields: ``index_type``, ``multi_vector``,
        ``sentence_vectors``, ``bm25``, ``method``, ``hnsw_m``, ``ivf_lists``, ``pq_m``, ``language_debias``
        (``"subspace+calibrate"``, the default; ``"subspace"``; ``""``: none). An existing index is replaced only
        with ``overwrite``. ``threads``: CPU threads for the model (default torch's; see :meth:`open`). ``files``:
        folders and files whose documents it holds too (:meth:`add_files`)."""
        from ..encoders.devices import pick_device, set_threads
        from ..encoders.registry import DEFAULT_MODEL
        from ..encoders.routing import route
        from .builder import IndexSettings

        try:
            chosen = IndexSettings(**settings)
        except TypeError as exc:
            raise HmdeError(f"Index.create: {exc} (settings: {', '.join(IndexSettings.__dataclass_fields__)})") from None
        chosen.check()
        check_batch_size(batch_size)
        set_threads(threads)
        records = _checked_records(path, documents, chosen, overwrite, files)
        name = route(model or DEFAULT_MODEL, languages_of([r.lang for r in records], [r.text for r in records]))
        device = pick_device(device)
        kind, loaded = load_model(name, device, backend=for_job(chosen.backend, chosen.sentence_vectors))
        return cls._create(path, records, name, kind, loaded, device, chosen, batch_size)

    @classmethod
    def create_with_model(cls, path: str, name: str, kind: str, model, device: str, documents=(),
                          overwrite: bool = False, batch_size: int = 64, **settings) -> "Index":
        """:meth:`create` with a model loaded already (``name``, ``kind`` and the model, as
        :func:`hmde.encoders.model_loading.load_model` gives them): the framework stores load one per process."""
        from .builder import IndexSettings

        chosen = IndexSettings(**settings)
        chosen.check()
        check_batch_size(batch_size)
        records = _checked_records(path, documents, chosen, overwrite)
        return cls._create(path, records, name, kind, model, device, chosen, batch_size)

    @classmethod
    def _create(cls, path, records, name, kind, loaded, device, chosen, batch_size) -> "Index":
        from ..encoders.registry import recorded_name, resolve_model_path
        from ..evaluation.provenance import model_hash
        from ..methods import default_method, method_class
        from .builder import embedding_chunks, new_meta, write_records

        method = chosen.method or default_method(kind == "hmde", name)
        if method_class(method).fitted:
            raise HmdeError(f"method {method} is fitted on a whole collection: build with `hmde index build "
                            f"--method {method}`")
        if chosen.multi_vector and chosen.sentence_vectors == "context" and not method_class(method).contextual:
            raise HmdeError(f"sentence_vectors 'context' stores HMDE's contextualised sentence vectors: method hmde, "
                            f"not {method}")
        recorded = recorded_name(name)
        chosen = dataclasses.replace(chosen, backend=recorded_backend(chosen.backend, loaded))
        meta = new_meta(chosen, recorded, model_hash(resolve_model_path(recorded)),
                        int((loaded.lower if kind == "hmde" else loaded).dim), method, path)
        from .memory_plan import check_records_fit

        check_records_fit(meta, records, str(path))  # a flat index too large to search: refused before embedding
        written = write_records(path, _vectorizer(loaded, method, batch_size), meta,
                                embedding_chunks(records, batch_size))
        return cls.with_model(written, name, kind, loaded, device)

    @classmethod
    def open_or_create(cls, path: str, name: str, kind: str, model, device: str, **settings) -> "Index":
        """The index at ``path`` with a model loaded already, made empty first where there is none: under the
        folder's writer lock, so that two processes (or threads) making one new index both get it, the second
        opening what the first made (issue 92: the second was told "an hmde index is already there")."""
        from ..ground.locks import exclusive_writer
        from ..ground.atomic import through_links
        from .store import DocumentIndex

        real = through_links(path)
        with exclusive_writer(real):
            if not (real / "index.json").is_file():
                return cls.create_with_model(path, name, kind, model, device, **settings)
        return cls.with_model(DocumentIndex.open(path), name, kind, model, device)

    @property
    def index(self):
        """The newest snapshot opened (a store of :mod:`hmde.index.store_protocol`); a call that reads it from
        several threads leases it instead (:meth:`snapshot`)."""
        return self._snapshots.current

    @property
    def path(self):
        return self._snapshots.current.path

    def snapshot(self):
        """``with index.snapshot() as store:`` the newest committed version, open until the block ends."""
        return self._snapshots.lease()

    def _swap(self, written) -> None:
        self._snapshots.replace(written)
        # a flat index's FAISS index over its sentences is made at a snapshot's first use (LocalStore.sentence_index):
        # made here, by the writer, once the version before is let go, not by the next reader's search
        getattr(written, "sentence_index", None)

    def add(self, documents, batch_size: int = 64) -> int:
        """Embed ``documents`` and add them in one commit (an id the index holds is refused:
        :class:`~hmde.index.records.DuplicateIds`, nothing written); their count."""
        return self.write(documents, "add", batch_size)

    def upsert(self, documents, batch_size: int = 64) -> int:
        """Embed ``documents`` and commit them: a document whose id the index holds replaces it (vectors,
        sentences, text, language); the others are added. Their count."""
        return self.write(documents, "upsert", batch_size)

    def write(self, documents, mode: str = "upsert", batch_size: int = 64, delete=(), progress=None) -> int:
        """Embed ``documents`` and commit them in one write, ``mode``: ``add`` (a known id refused), ``upsert`` (a
        known id replaced) or ``skip`` (a known id passed over); whether an id is known is decided under the
        writer's lock, so writers racing with one id get what the mode promises; the ids ``delete`` leave in the
        same commit (those the index holds); ``progress(n)`` after each batch of ``n`` embedded. How many were written."""
        from .builder import MODES

        if mode not in MODES or mode == "create":
            raise HmdeError(f"mode must be add, upsert or skip, got {mode!r}")
        return self._write(documents, mode, batch_size, [str(x) for x in delete], progress)

    def _write(self, documents, mode: str, batch_size: int, delete: list[str] = (), progress=None) -> int:
        from ..io.documents import records_from
        from .builder import embedding_chunks, write_records

        check_batch_size(batch_size)
        records = records_from(documents)
        if not records and not delete:
            return 0
        with self.snapshot() as index:
            meta = index.meta
        if meta.store == "milvus":
            from .milvus_client import check_records_fit

            check_records_fit(records, "documents")
        written = write_records(self.path, _vectorizer(self.model, meta.method, batch_size), meta,
                                embedding_chunks(records, batch_size), mode, progress or (lambda n: None), delete)
        self._swap(written)
        return len(records) - getattr(written, "skipped", 0)

    def delete(self, doc_ids, ignore_missing: bool = False) -> int:
        """Delete the documents ``doc_ids`` in one commit; an id the index does not hold is refused
        (:class:`~hmde.index.mutations.UnknownIds`, nothing deleted) unless ``ignore_missing``. Their count."""
        from .mutations import delete_documents
        from .records import UnknownIds
        from .store import DocumentIndex

        if isinstance(doc_ids, str):
            doc_ids = [doc_ids]
        try:
            deleted = delete_documents(self.path, list(doc_ids), ignore_missing)
        except UnknownIds as exc:  # the command line's message names its flag; Python's names the argument
            raise UnknownIds(exc.missing, exc.path, "ignore_missing=True") from None
        self._swap(DocumentIndex.open(self.path))
        return deleted

    def compact(self, sentence_dtype: str | None = None) -> int:
        """Write the index again without its deleted rows (``sentence_dtype``: its sentence vectors stored as that
        from now on, :func:`~hmde.index.mutations.compact_index`); how many were dropped."""
        from .mutations import compact_index
        from .store import DocumentIndex

        dropped = compact_index(self.path, sentence_dtype)
        self._swap(DocumentIndex.open(self.path))
        return dropped

    def info(self) -> dict:
        """Model, method, kinds, live and deleted documents and sentences, languages, bytes on disk."""
        from .builder import describe

        with self.snapshot() as index:
            return describe(index)

    # -- documents read back without a query (hmde.index.lookup) -----------------------------------------------
    def documents(self, ids=None, filter=None, limit: int | None = None, offset: int = 0) -> list[dict]:
        """``{"doc_id", "text", "lang", "metadata"}`` of the documents ``ids`` holds (those the index has) and
        ``filter`` matches (any form :func:`hmde.index.filter_forms.to_tree` takes), in the order written; every
        document without either. ``limit``/``offset`` page through them."""
        from .lookup import documents

        with self.snapshot() as index:
            return documents(index, _ids(ids), check_filter(index, filter), limit, offset)

    def all_documents(self, ids=None, filter=None) -> list[dict]:
        """Every document :meth:`documents` would give, however many (read a page at a time, from one version)."""
        from .lookup import pages

        with self.snapshot() as index:
            return [d for page in pages(index, _ids(ids), check_filter(index, filter)) for d in page]

    def document_ids(self, ids=None, filter=None) -> list[str]:
        """The ids of every document ``ids`` holds and ``filter`` matches (every document without either), however
        many, in the order written."""
        from .lookup import pages

        with self.snapshot() as index:
            return [d["doc_id"] for page in pages(index, _ids(ids), check_filter(index, filter)) for d in page]

    def count(self, filter=None, ids=None) -> int:
        """How many documents ``filter`` matches among ``ids`` (every live one without either)."""
        from .lookup import count

        with self.snapshot() as index:
            return count(index, check_filter(index, filter), _ids(ids))

    def document_vectors(self, ids) -> tuple:
        """The stored document vectors of those of ``ids`` the index holds (unit length), in the order asked."""
        from .lookup import document_vectors

        with self.snapshot() as index:
            return document_vectors(index, _ids(ids))

    def update_metadata(self, metadata: dict, ids=None, filter=None, replace: bool = False) -> int:
        """Give the documents ``ids`` holds and ``filter`` matches (every document without either) ``metadata``:
        merged into each one's (``replace``: instead of it), in one commit; their count. Nothing is embedded again
        where the index holds exact vectors (all but an IVF-PQ index of another method than the sentences' mean)."""
        from .metadata_update import check_metadata_change, update_metadata
        from .store import DocumentIndex

        check_metadata_change(metadata)
        with self.snapshot() as index:
            tree = check_filter(index, filter)
        updated, to_embed = update_metadata(self.path, metadata, _ids(ids), tree, replace)
        if to_embed is not None:  # the stored vectors are codes: embed the documents again
            return self.upsert(to_embed)
        self._swap(DocumentIndex.open(self.path))
        return updated

    @classmethod
    def open(cls, path: str, model: str | None = None, device: str = "auto", backend: str | None = None,
             threads: int | None = None) -> "Index":
        """The index at ``path`` with its model loaded. ``threads``: CPU threads for the model (torch's, for the
        whole process; default one per core: on a machine busy with other work 1 can be several times faster)."""
        from ..encoders.devices import set_threads
        from .store import DocumentIndex

        set_threads(threads)
        return cls.attach(DocumentIndex.open(path), model, device, backend)

    @classmethod
    def attach(cls, index, model: str | None = None, device: str = "auto", backend: str | None = None) -> "Index":
        """An open :class:`~hmde.index.store.DocumentIndex` with its model loaded (closed if that fails)."""
        from ..encoders.devices import pick_device
        from ..encoders.registry import recorded_model, recorded_model_available
        from ..encoders.routing import refuse_for_one_space

        try:
            refuse_for_one_space(model, "an index", f"leave --model out (it was built with {index.meta.model})")
            name = model or recorded_model(index.meta.model)
            if model is None and not recorded_model_available(name):
                raise HmdeError(f"index {index.path} was built with {index.meta.model}, which is neither a folder "
                                "here, nor a model bundled with hmde, nor in the local Hugging Face cache: pass --model "
                                "with that model's folder")
            device = pick_device(device)
            kind, loaded = load_model(name, device, backend=for_index(index.meta, backend))
        except BaseException:
            index.close()
            raise
        return cls.with_model(index, name, kind, loaded, device)

    @classmethod
    def with_model(cls, index, name: str, kind: str, model, device: str) -> "Index":
        """An open index with a model loaded already (the server loads one model for all its indexes);
        refused, and the index closed, if the index was built with another model."""
        from ..evaluation.provenance import model_hash
        from .store import check_compatible
        from ..encoders.registry import resolve_model_path

        opened = cls(index, name, kind, model, device)
        try:
            check_compatible(index.meta, model_hash(resolve_model_path(name)), opened.lower.dim, index.path)
        except BaseException:
            index.close()
            raise
        return opened

    @property
    def lower(self):
        return self.model.lower if self.kind == "hmde" else self.model

    def _embed_queries(self, queries: list[str]):
        return self.lower.encode(list(queries), prompt_name="query")

    def encode_queries(self, queries: list[str]):
        """Queries through the index's sentence encoder (the CLIR protocol), as every search embeds them: on the
        model thread, with the queries of other threads' searches waiting at the same moment."""
        return self._queries(list(queries))

    async def aencode_queries(self, queries: list[str]):
        """:meth:`encode_queries` for a caller on an event loop, which goes on while the model works."""
        return await self._queries.awaiting(list(queries))

    def search(self, queries: list[str] | str, top_k: int = 10, lang: str | None = None,
               ef_search: int | None = None, nprobe: int | None = None, hybrid: bool = False,
               hybrid_weights: tuple[float, float] = (1.0, 1.0), rrf_k: int = 60, multi_vector: bool | None = None,
               top_sentences: int = DEFAULT_TOP_SENTENCES, doc_weight: float = DEFAULT_DOC_WEIGHT,
               query_vectors=None, candidates: int | None = None, query_lang: str | None = None,
               filter: str | None = None, group_by: str | None = None):
        """``group_by``: one hit per value of this metadata field (:func:`hmde.index.ranking.search`).
        ``query_vectors``: the queries embedded already (:meth:`encode_queries`; the server batches
        them with other requests); else they are embedded here. ``candidates``: sentences scored per query
        in a multi-vector index (:meth:`hmde.index.store.DocumentIndex.search`). ``query_lang``: the queries'
        language, for an index that calibrates by it (default: each query's own, detected; ``"none"``: not
        calibrated). ``filter``: only the documents this expression matches (:mod:`hmde.index.filters`:
        ``section == "sport" and date >= "2024-01-01"``), checked before the queries are embedded; each hit
        carries its document's ``metadata``."""
        from ..methods.vectorizer import DocumentVectorizer
        from .calibration import query_languages

        queries = [queries] if isinstance(queries, str) else list(queries)
        check_request(queries, top_k, top_sentences, doc_weight, query_lang)
        with self.snapshot() as index:
            multi_vector = check_index_request(index, hybrid, multi_vector, ef_search, nprobe)
            tree = check_filter(index, filter)
            if query_vectors is None:
                warn_uncovered(self.model_name, self.model, languages_of([None] * len(queries), queries), "queries")
                query_vectors = self.encode_queries(queries)

            def sentences_of(texts, langs):  # hits whose sentences were not stored (built with --engine ray) only
                from ..encoders.model_thread import run_on_model_thread

                return run_on_model_thread(DocumentVectorizer(self.model, "mean").sentences, texts, langs)

            return index.search(query_vectors, top_k, lang, sentences_of=sentences_of,
                                ef_search=ef_search, nprobe=nprobe, hybrid_texts=list(queries) if hybrid else None,
                                hybrid_mode="rrf" if hybrid == "rrf" else "lexical",
                                hybrid_weights=hybrid_weights, rrf_k=rrf_k, multi_vector=multi_vector,
                                top_sentences=top_sentences, doc_weight=doc_weight, candidates=candidates,
                                query_langs=query_languages(index, queries, query_lang), filter=tree,
                                group_by=group_by)

    async def asearch(self, queries: list[str] | str, top_k: int = 10, **options):
        """:meth:`search` for a caller on an event loop: the queries wait for the model thread with every other
        caller's, the ranking runs in a worker thread; the loop goes on meanwhile."""
        import asyncio

        queries = [queries] if isinstance(queries, str) else list(queries)
        if options.get("query_vectors") is None:
            check_request(queries, top_k, options.get("top_sentences", DEFAULT_TOP_SENTENCES),
                          options.get("doc_weight", DEFAULT_DOC_WEIGHT), options.get("query_lang"))
            options["query_vectors"] = await self.aencode_queries(queries)
        return await asyncio.get_running_loop().run_in_executor(
            None, lambda: self.search(queries, top_k, **options))

    def close(self) -> None:
        self._snapshots.close()

    def __enter__(self) -> "Index":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _vectorizer(model, method: str, batch_size: int):
    """The write's vectorizer, its model calls on the model thread (a write from any thread, beside searches)."""
    from ..encoders.model_thread import OnModelThread
    from ..methods import method_class
    from ..methods.vectorizer import DocumentVectorizer, MethodOptions

    if method_class(method).fitted:
        raise HmdeError(f"the index holds '{method}' document vectors, fitted on a collection: add to it with `hmde "
                        "index add --lawdr-stats` (the statistics it was built with)")
    return OnModelThread(DocumentVectorizer(model, method, MethodOptions(batch_size=batch_size)))
