"""The settings of every recipe, as values (``hmde recipe`` fills them from its flags; the defaults are
the 2-core budgets the bundled models were built with)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RecipeOptions:
    data: str = "../shared/data"
    output: str = "runs/recipe"
    device: str = "auto"
    preset: str | None = None  # "paper": the paper's document-length settings in every HMDE step
    skip_eval: bool = False
    install: bool = False  # copy the exported model into the package
    trained_on: str = "2 CPU cores"  # for the model card
    # mini
    lower_epochs: float = 0.6
    frozen_epochs: float = 3.0
    joint_steps: int = 60
    lower_batch_size: int = 128
    lower_max_length: int = 32
    lower_time_budget: float | None = None  # minutes
    frozen_max_sentences: int = 12
    query_loss_weight: float = 1.0
    # use
    use_news_documents: int = 2000
    use_epochs: float = 1.0
    use_paper_upper: bool = False
    use_max_sentences: int = 32
    use_lr: float = 2e-4
    use_sentence_loss_weight: float = 0.0
    # e5
    e5_bible_pairs: int = 2000
    e5_news_pairs: int = 1000
    e5_docs_pairs: int = 0  # per docs/ source; 0: Bible and news only, as the shipped hmde-e5
    e5_docs_sources: str = "libreoffice,gnome,tldr,udhr"
    e5_control: bool = True
    e5_query_loss_weight: float = 0.0
    e5_residual: bool = False
    e5_covered_pairs: bool = True
    e5_news_documents: int = 300
    e5_frozen_epochs: float = 3.0
    e5_frozen_lr: float = 2e-4
    e5_joint_steps: int = 60
    e5_grad_accum: int = 8
    e5_joint_warmup: int = 6
    e5_lower_trainable: str = "all"
    e5_sentence_stage: bool = True  # stage 3, hmde sentence-stage: titles, headings, translations (issue 64)
    e5_eval_only: bool = False
    e5_eval_rows: tuple[str, ...] | None = None
