"""An hmde folder is a sentence-transformers model: a Router, query route = lower encoder, document route = HMDE."""

import json
import shutil

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

import hmde
from hmde import HierarchicalEncoder
from hmde.evaluation.mteb_adapter import MtebEncoder
from hmde.evaluation.provenance import model_hash
from hmde.st_router import HmdeDocumentModule, document_module

DOCS = [
    "The cat sat on the mat. It was a sunny day in the old town. Economic growth slowed.",
    "Die Katze saß auf der Matte. Es war ein sonniger Tag.",
    "",  # an empty document: a zero vector on both paths
    " ".join(f"Sentence number {i} of a long report." for i in range(45)),  # more than 32 sentences: windows
]
QUERIES = ["a cat on a mat", "economic growth"]


@pytest.fixture(scope="module")
def pair(hmde_dir):
    return HierarchicalEncoder.from_pretrained(hmde_dir), hmde.sentence_transformer(hmde_dir)


def test_routes_equal_the_hierarchical_encoder(pair):
    model, st = pair
    documents = model.encode_documents(DOCS)
    np.testing.assert_allclose(st.encode_document(DOCS), documents, atol=1e-5)
    np.testing.assert_allclose(st.encode_query(QUERIES), model.encode_queries(QUERIES), atol=1e-5)
    # encode() without a task takes the default route, the document one (Router.for_query_document's default)
    np.testing.assert_allclose(st.encode(DOCS), documents, atol=1e-5)
    assert np.abs(documents[2]).max() == 0.0
    assert st.similarity_fn_name == "cosine"


def test_the_lower_encoder_is_held_once(pair):
    model, st = pair
    assert sum(p.numel() for p in st.parameters()) == sum(p.numel() for p in model.parameters())
    doc = document_module(st)
    query_route = st[0].sub_modules["query"]
    assert all(a is b for a, b in zip(doc.hierarchical.lower.model.children(), query_route.children()))


def test_lang_sets_the_sentence_splitter(pair):
    model, st = pair
    text = ["Dr. Müller kam um 5 Uhr. Er blieb lange."]
    np.testing.assert_allclose(st.encode_document(text, lang="deu"), model.encode_documents(text, langs="deu"),
                               atol=1e-5)
    with pytest.raises(hmde.HmdeError, match="one language code"):
        st.encode_document(text, lang=["deu"])


def test_save_load_round_trip_through_sentence_transformers(pair, tmp_path):
    model, st = pair
    st.save(str(tmp_path / "st"))
    assert json.loads((tmp_path / "st" / "router_config.json").read_text())["structure"]["document"] == \
        ["document_0_HmdeDocumentModule"]
    again = hmde.sentence_transformer(tmp_path / "st")
    np.testing.assert_allclose(again.encode_document(DOCS), model.encode_documents(DOCS), atol=1e-5)
    np.testing.assert_allclose(again.encode_query(QUERIES), model.encode_queries(QUERIES), atol=1e-5)
    back = HierarchicalEncoder.from_pretrained(tmp_path / "st")  # hmde reads sentence-transformers' save too
    np.testing.assert_allclose(back.encode_documents(DOCS), model.encode_documents(DOCS), atol=1e-5)


def test_plain_sentence_transformer_needs_trust_remote_code_for_hmde_classes(pair, hmde_dir):
    """sentence-transformers >= 6 refuses every class outside its namespace without the flag, local
    folders included: hmde.sentence_transformer exists for that. With the flag, the installed hmde is used."""
    model, _ = pair
    with pytest.raises(ValueError, match="trust_remote_code"):
        SentenceTransformer(str(hmde_dir))
    trusted = SentenceTransformer(str(hmde_dir), trust_remote_code=True)
    np.testing.assert_allclose(trusted.encode_document(DOCS), model.encode_documents(DOCS), atol=1e-5)
    assert isinstance(document_module(trusted), HmdeDocumentModule)


def test_a_folder_saved_before_the_router_files_still_loads(pair, hmde_dir, tmp_path):
    model, _ = pair
    old = tmp_path / "old"
    shutil.copytree(hmde_dir, old)
    for name in ("modules.json", "router_config.json", "config_sentence_transformers.json"):
        (old / name).unlink()
    st = hmde.sentence_transformer(old)
    np.testing.assert_allclose(st.encode_document(DOCS), model.encode_documents(DOCS), atol=1e-5)
    np.testing.assert_allclose(HierarchicalEncoder.from_pretrained(old).encode_documents(DOCS),
                               model.encode_documents(DOCS), atol=1e-5)
    # the router files are derived: adding them leaves the model's hash (and indexes built with it) as it was
    assert model_hash(old) == model_hash(hmde_dir)


@pytest.mark.parametrize("name", ["hmde-mini", "hmde-use"])
def test_bundled_models_load_as_sentence_transformers(name):
    model = HierarchicalEncoder.from_pretrained(name)
    st = hmde.sentence_transformer(name)
    np.testing.assert_allclose(st.encode_document(DOCS[:2]), model.encode_documents(DOCS[:2]), atol=1e-5)
    np.testing.assert_allclose(st.encode_query(QUERIES), model.encode_queries(QUERIES), atol=1e-5)


def test_mteb_encoder_protocol_through_the_sentence_transformer(pair):
    model, st = pair

    class PromptType:  # MTEB passes an enum whose value is "query" for queries
        value = "query"

    through_st, through_hmde = MtebEncoder(st), MtebEncoder(model)
    np.testing.assert_allclose(through_st.encode(QUERIES, prompt_type=PromptType()),
                               through_hmde.encode(QUERIES, prompt_type=PromptType()), atol=1e-5)
    corpus = [{"title": "Cats", "text": DOCS[0]}, {"title": "", "text": DOCS[1]}]
    np.testing.assert_allclose(through_st.encode(corpus), through_hmde.encode(corpus), atol=1e-5)


def test_a_document_module_alone_says_how_to_load_it(hmde_dir):
    module = HmdeDocumentModule.load(str(hmde_dir))
    with pytest.raises(hmde.HmdeError, match="Router"):
        module.preprocess(["text"])
