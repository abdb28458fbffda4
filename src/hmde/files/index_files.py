"""What :class:`hmde.Index` does with files and folders: their documents written (:meth:`FileWrites.add_files`) and a
folder kept in sync (:meth:`FileWrites.sync`), both through the index's one write (``Index.write``)."""

from __future__ import annotations


class FileWrites:
    """The file doors of :class:`hmde.Index` (a base class: they call its ``write``)."""

    def add_files(self, paths, mode: str = "add", on_error: str = "stop", batch_size: int = 64) -> int:
        """The documents of ``paths`` (folders, PDF, HTML, Word, Markdown or text files, or structured files:
        :func:`hmde.files.inputs.read_inputs`) embedded and committed as :meth:`write` does; ``on_error="skip"``
        passes over files that cannot be read (``last_read``: what the read skipped and left out)."""
        from ..files.inputs import ReadOptions, ReadReport, read_inputs
        from ..io.documents import ALL_FIELDS

        self.last_read = ReadReport()
        records = list(read_inputs(paths, ReadOptions(keep_fields=ALL_FIELDS, on_error=on_error), self.last_read))
        return self.write(records, mode, batch_size)

    def sync(self, folder, on_error: str = "stop", batch_size: int = 64, progress=None, planned=None, options=None):
        """Make the index hold ``folder``'s files as they are, in one commit (:func:`hmde.files.sync.sync_folder`):
        new files added, changed ones replaced, removed ones deleted; documents from elsewhere untouched."""
        from ..files.sync import sync_folder

        return sync_folder(self, folder, on_error, batch_size, progress, planned, options)
