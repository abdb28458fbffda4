"""Quiet third-party libraries: the load reports, progress bars and notices of transformers, the hub and
sentence-transformers, for the command line and for Python use alike (issue 57: "Loading weights" bars and
e5's prompt notice printed on every ``hmde.Index.open``)."""

from __future__ import annotations

import logging
import os
import sys
import warnings


def quiet_libraries() -> None:
    """Silence the load reports and progress bars of transformers and the hub: through the settings
    they read when they are imported, so that a command that never loads a model never imports them
    (seconds of start-up), and directly where they are imported already."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if "transformers" in sys.modules:
        try:
            import transformers

            transformers.utils.logging.set_verbosity_error()
            transformers.utils.logging.disable_progress_bar()
        except Exception:  # pragma: no cover - logging helpers moved
            pass
    if "huggingface_hub" in sys.modules:
        try:
            from huggingface_hub.utils import disable_progress_bars

            disable_progress_bars()
        except Exception:  # pragma: no cover
            pass
    logging.getLogger("sentence_transformers").setLevel(logging.WARNING)
    # torch's weights-only loader notes the pickle protocol of a .bin it is about to refuse; hmde says why
    # in one line (encoders/sentence_encoder.load_failure_message)
    warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
    # "Default prompt name is set to 'document'" on every e5 load: hmde sets the prompts on purpose
    logging.getLogger("sentence_transformers.base.model").setLevel(logging.ERROR)
