import pytest

from hmde.text.segmentation import chunk_document, fit_to_budget, split_sentences, splitter_language, token_windows


def test_latin_abbreviations_are_not_sentence_ends():
    assert split_sentences("Dr. Smith arrived at 5 p.m. today. He left early!", "eng") == [
        "Dr. Smith arrived at 5 p.m. today.",
        "He left early!",
    ]
    assert split_sentences("Das ist z.B. ein Test. Noch ein Satz.", "deu") == ["Das ist z.B. ein Test.", "Noch ein Satz."]


def test_cjk_and_arabic_punctuation():
    assert split_sentences("猫坐在垫子上。那是一个晴朗的日子！", "zho") == ["猫坐在垫子上。", "那是一个晴朗的日子！"]
    assert split_sentences("مرحبا. كيف حالك؟ أنا بخير.", "ara") == ["مرحبا.", "كيف حالك؟", "أنا بخير."]


def test_language_codes_map_to_splitter_codes():
    assert splitter_language("eng") == "en"
    assert splitter_language("zh-Hant") == "zh"
    assert splitter_language(None, default="fr") == "fr"


def test_empty_text_has_no_sentences():
    assert split_sentences("   ") == []


@pytest.fixture(scope="module")
def tokenizer(labse_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(labse_dir))


def test_long_sentence_is_split_into_pieces_that_fit(tokenizer):
    long = " ".join(["the cat sat on the mat"] * 40)  # 240 words
    pieces = fit_to_budget([long, "short one"], tokenizer, max_tokens=32, mode="split")
    assert pieces[-1] == "short one"
    assert len(pieces) > 2
    for p in pieces:
        assert len(tokenizer(p)["input_ids"]) <= 32
    # nothing is lost: the pieces put together give the original words
    assert " ".join(pieces[:-1]).split() == long.split()


def test_cutting_long_text_does_not_warn_of_indexing_errors(labse_dir, caplog):
    """Segmentation tokenizes whole sentences on purpose, to cut them to fit; transformers' warning that
    such a sequence "will result in indexing errors" would be false and alarming there."""
    import transformers
    from transformers import AutoTokenizer

    fresh = AutoTokenizer.from_pretrained(str(labse_dir), model_max_length=16)  # the warning is once per instance
    long = " ".join(["the cat sat on the mat"] * 10)
    transformers.logging.enable_propagation()
    try:
        with caplog.at_level("WARNING", logger="transformers"):
            fit_to_budget([long], fresh, max_tokens=16, mode="split")
            token_windows(long, fresh, window_tokens=8)
            assert not [r for r in caplog.records if "indexing errors" in r.getMessage()]
            fresh(long)  # the check can fail: the same tokenizer warns when called plainly
            assert [r for r in caplog.records if "indexing errors" in r.getMessage()]
    finally:
        transformers.logging.disable_propagation()


def test_truncate_mode_keeps_sentences(tokenizer):
    long = " ".join(["word"] * 300)
    assert fit_to_budget([long], tokenizer, 32, mode="truncate") == [long]


def test_overlapping_windows(tokenizer):
    text = " ".join(f"w{i}" for i in range(30))
    n_tokens = len(tokenizer(text, add_special_tokens=False)["input_ids"])
    windows = token_windows(text, tokenizer, window_tokens=12, stride_tokens=8)
    # windows start every 8 tokens until one reaches the end
    expected = 1 + -(-(n_tokens - 12) // 8)
    assert len(windows) == expected
    assert text.startswith(windows[0]) and text.endswith(windows[-1])


def test_chunks_of_the_whole_document(tokenizer):
    text = "The cat sat on the mat. " * 30
    chunks = chunk_document(text, tokenizer, 16)
    assert all(len(tokenizer(c)["input_ids"]) <= 16 for c in chunks)
    assert " ".join(chunks).split() == text.split()


# -- scripts without sentence punctuation (hmde.text.script_sentences) ----------------------------


def test_thai_paragraph_is_split_into_sentences_by_pythainlp():
    text = "แมวนอนอยู่บนโซฟา ฝนตกข้างนอก เด็กๆ กำลังเล่นในบ้าน วันนี้อากาศดีมาก"
    assert split_sentences(text, "tha") == ["แมวนอนอยู่บนโซฟา", "ฝนตกข้างนอก", "เด็กๆ กำลังเล่นในบ้าน", "วันนี้อากาศดีมาก"]


def test_lao_spaces_end_sentences_except_after_the_repetition_mark_and_at_numbers():
    text = "ແມວນອນຢູ່ເທິງໂຊຟາ ຝົນຕົກຢູ່ນອກ ເດັກໆ ຫຼິ້ນຢູ່ໃນເຮືອນ ປີ 2024 ດີຫຼາຍ"
    assert split_sentences(text, "lao") == ["ແມວນອນຢູ່ເທິງໂຊຟາ", "ຝົນຕົກຢູ່ນອກ", "ເດັກໆ ຫຼິ້ນຢູ່ໃນເຮືອນ", "ປີ 2024 ດີຫຼາຍ"]


def test_khmer_khan_and_bariyoosan_end_sentences():
    text = "ឆ្មាកំពុងដេកលើសាឡុង។ ភ្លៀងកំពុងធ្លាក់នៅខាងក្រៅ។ចប់៕"
    assert split_sentences(text, "khm") == ["ឆ្មាកំពុងដេកលើសាឡុង។", "ភ្លៀងកំពុងធ្លាក់នៅខាងក្រៅ។", "ចប់៕"]


def test_myanmar_section_mark_ends_sentences():
    text = "ကြောင်သည် ဆိုဖာပေါ်တွင် အိပ်နေသည်။ အပြင်မှာ မိုးရွာနေသည်။"
    assert split_sentences(text, "mya") == ["ကြောင်သည် ဆိုဖာပေါ်တွင် အိပ်နေသည်။", "အပြင်မှာ မိုးရွာနေသည်။"]


def test_character_blocks_cut_at_whitespace_and_keep_every_other_character():
    from hmde.text.segmentation import character_blocks

    text = "aaaa bbbb cccc dddd eeee"
    blocks = character_blocks(text, limit=10)
    assert blocks == ["aaaa bbbb", "cccc dddd", "eeee"]
    assert " ".join(blocks) == text
    assert character_blocks("x" * 25, limit=10) == ["x" * 10, "x" * 10, "x" * 5]  # no whitespace: a hard cut
    assert character_blocks("short", limit=10) == ["short"]


def test_a_huge_one_line_document_is_never_tokenised_whole(monkeypatch):
    """Issue 29: a 50 MB one-line document peaked at 11.9 GB, tokenised whole with offsets. The tokenizer
    now sees at most BLOCK_CHARS characters at a time, and every word still reaches some unit."""
    from transformers import PreTrainedTokenizerFast

    from hmde import HierarchicalEncoder
    from hmde.text.segmentation import BLOCK_CHARS

    model = HierarchicalEncoder.from_pretrained("hmde-mini")
    tokenizer = model.lower.tokenizer
    longest = []
    original = PreTrainedTokenizerFast.__call__

    def watched(self, text, *args, **kwargs):
        texts = [text] if isinstance(text, str) else list(text)
        longest.append(max((len(t) for t in texts), default=0))
        return original(self, text, *args, **kwargs)

    monkeypatch.setattr(type(tokenizer), "__call__", watched)
    words = [f"w{i}" for i in range(60_000)]
    units = model.segment(" ".join(words), "eng")
    assert max(longest) <= BLOCK_CHARS
    assert "".join(units).replace(" ", "") == "".join(words)  # token windows may cut inside a word


def test_an_over_long_sentence_is_cut_between_words_preferring_clause_marks(e5_folder):
    """Issue 48: stored units ended mid-word (Greek `Λουφτ|βάφε`, `εκατ|ό`); a cut falls after a clause mark
    in the window's second half, else at its last space."""
    from transformers import AutoTokenizer

    from hmde.text.segmentation import fit_to_budget

    tok = AutoTokenizer.from_pretrained(str(e5_folder))
    sentence = "Η Λουφτβάφε, η γερμανική πολεμική αεροπορία, βομβάρδισε την πόλη εκατό φορές; " * 6
    pieces = fit_to_budget([sentence.strip()], tok, 42)
    assert len(pieces) > 1 and " ".join(pieces) == " ".join(sentence.split())  # nothing lost, in order
    words = set(sentence.replace(",", " ").replace(";", " ").split())
    for piece in pieces:
        first, last = piece.split()[0].strip(",;"), piece.split()[-1].strip(",;")
        assert first in words and last in words, piece  # never a piece of a word at either end
        assert piece[-1] in ",;" or piece == pieces[-1]  # a clause mark ends every piece but the last
    cjk = fit_to_budget(["这是一个很长的句子" * 30], tok, 42)  # no spaces at all: cut between tokens
    assert "".join(cjk) == "这是一个很长的句子" * 30


def test_units_of_punctuation_alone_are_dropped():
    from hmde.encoders.config import HierarchicalConfig
    from hmde.text.segmentation import segment_document, split_sentences

    assert split_sentences("First one. . And a second one!", "en") == ["First one.", "And a second one!"]

    class Tok:  # short units never reach the tokenizer's budget check beyond counting
        def num_special_tokens_to_add(self, pair=False):
            return 2

        def __call__(self, texts, **kw):
            return {"input_ids": [[0] * 3 for _ in texts]}

    assert segment_document(["A verse.", ".", "—", "Another."], "en", HierarchicalConfig(), Tok()) == \
        ["A verse.", "Another."]


@pytest.mark.parametrize("text, lang, expected", [
    # issue 57: sentencex cut Greek, Bulgarian and Hebrew initials off ("Α." became a unit and a hub)
    ("Ο θεωρητικός Τζ. Α. Χόμπσον (1858-1940) έγραψε. Μετά ήρθε.", "el",
     ["Ο θεωρητικός Τζ. Α. Χόμπσον (1858-1940) έγραψε.", "Μετά ήρθε."]),
    ("Ο Ντ. Τραμπ είπε. Μετά έφυγε.", "ell", ["Ο Ντ. Τραμπ είπε.", "Μετά έφυγε."]),
    ("Поетът И. Вазов е роден. Той пише.", "bg", ["Поетът И. Вазов е роден.", "Той пише."]),
    ("Поэт А. С. Пушкин родился в Москве. Он писал.", "ru", ["Поэт А. С. Пушкин родился в Москве.", "Он писал."]),
    ("המשורר א. ב. יהושע כתב. אחר כך הלך.", "he", ["המשורר א. ב. יהושע כתב.", "אחר כך הלך."]),
    ("Le théoricien J.-A. Hobson écrivit. Puis il partit.", "fr", ["Le théoricien J.-A. Hobson écrivit.",
                                                                    "Puis il partit."]),
    ("The theorist J. A. Hobson (1858-1940) wrote. Then he left.", "en",
     ["The theorist J. A. Hobson (1858-1940) wrote.", "Then he left."]),
    # citation fragments close the sentence before instead of opening the next
    ("It was large.:212–219 Then it fell.[citation needed] It rose again.", "en",
     ["It was large.:212–219", "Then it fell.[citation needed]", "It rose again."]),
    ("1. Open the file. 2. Save it.", "en", ["1. Open the file.", "2. Save it."]),
    ("猫坐在垫子上。那是一个晴朗的日子！", "zho", ["猫坐在垫子上。", "那是一个晴朗的日子！"]),
])
def test_initials_and_citation_fragments_are_never_units_of_their_own(text, lang, expected):
    from hmde.text.segmentation import has_word

    units = split_sentences(text, lang)
    assert units == expected
    assert all(has_word(u) for u in units)


def test_a_unit_has_a_word_when_it_holds_two_letters_or_an_unspaced_scripts_character():
    from hmde.text.segmentation import has_word

    assert not any(has_word(u) for u in ["Α.", ":212–219", "1.", "[1]", "—", "J."])
    assert all(has_word(u) for u in ["Τζ.", "ok", "猫", "ねこ", "แมว", "고양이", "[citation needed]"])


@pytest.mark.parametrize("text, lang, expected", [
    # a title without a full stop was glued to the article's first sentence (issue 64)
    ("Hong Kong protests grow\nThousands marched on Sunday. Police used tear gas.", "en",
     ["Hong Kong protests grow", "Thousands marched on Sunday.", "Police used tear gas."]),
    ("Σεισμός στην Κρήτη\nΈνας ισχυρός σεισμός έπληξε το νησί.", "el",
     ["Σεισμός στην Κρήτη", "Ένας ισχυρός σεισμός έπληξε το νησί."]),
    ("第一章\n他说了。", "zh", ["第一章", "他说了。"]),
    ("Breaking news\n«Le président a parlé.» Fin.", "fr", ["Breaking news", "«Le président a parlé.»", "Fin."]),
    # left to the splitter: a line the next one continues in lowercase (text wrapped at a width), a line ending in
    # punctuation or a note, a next line that starts with a digit ("compressed O" + "2", XQuAD's subscript)
    ("This line is wrapped at the\nend of a line and continues. Next one.", "en",
     ["This line is wrapped at the\nend of a line and continues.", "Next one."]),
    ("Contents:\nIntroduction and more.", "en", ["Contents:\nIntroduction and more."]),
    ("The huguenots.[citation needed]\nLater they left.", "en", ["The huguenots.[citation needed]", "Later they left."]),
    ("a mixture of acetylene and compressed O\n2. This method became common.", "en",
     ["a mixture of acetylene and compressed O\n2.", "This method became common."]),
])
def test_a_line_without_final_punctuation_is_a_sentence_when_the_next_line_starts_one(text, lang, expected):
    assert split_sentences(text, lang) == expected


def test_chinese_quotes_typed_the_wrong_way_round_end_their_sentences():
    """Issue 77: an ASCII quote opening and a left curly quote closing ("...。“) were one quotation to the splitter:
    four sentences kept as one. The pieces are cut from the text as written."""
    from hmde.text.segmentation import split_sentences

    text = '他说："我们明天去北京。“她回答："好的，我准备好了。“然后他们出发了。天气很好。'
    assert split_sentences(text, "zho") == ['他说："我们明天去北京。“', '她回答："好的，我准备好了。“', '然后他们出发了。',
                                            '天气很好。']
    typeset = "他说：“我们明天去北京。”她回答：“好的。”然后他们出发了。"
    assert split_sentences(typeset, "zho") == ["他说：“我们明天去北京。”", "她回答：“好的。”", "然后他们出发了。"]


# -- quotation marks that merged sentences (issue 95; hmde.text.quotes) ------------------------------------------
def test_a_german_quotation_closed_by_a_plain_quote_no_longer_swallows_the_next_sentences():
    text = ('Er sagte: „Wir kommen morgen. Dann reden wir." Danach ging er. Die Fans jubelten. Sie rief: „Es war '
            'spät. Alle gehen." Der Bus fuhr ab.')
    assert split_sentences(text, "de") == [
        'Er sagte: „Wir kommen morgen. Dann reden wir."', "Danach ging er.", "Die Fans jubelten.",
        'Sie rief: „Es war spät. Alle gehen."', "Der Bus fuhr ab."]  # before: one piece held the middle three


def test_a_long_french_quotation_is_cut_into_its_sentences_and_each_mark_stays_with_its_own():
    quoted = ["Nous avons gagné une victoire historique ce soir dans toutes les régions du pays.",
              "Les électeurs ont parlé très clairement et nous les avons entendus, tous, sans exception.",
              "Nous allons gouverner avec tout le monde, dès demain matin, dans chaque ville.",
              "Nous tiendrons nos promesses une par une."]
    text = "Le ministre a déclaré : « " + " ".join(quoted) + " » Puis il est parti. La foule a applaudi."
    assert split_sentences(text, "fr") == [
        "Le ministre a déclaré : « " + quoted[0], quoted[1], quoted[2], quoted[3] + " »", "Puis il est parti.",
        "La foule a applaudi."]  # before: the first 353 characters were one "sentence"
    short = "Il a dit : « Nous avons gagné. Les électeurs ont parlé. » Puis il est parti."
    assert split_sentences(short, "fr")[0] == "Il a dit : « Nous avons gagné. Les électeurs ont parlé. »"  # kept


def test_a_long_chinese_quotation_is_cut_and_its_closing_bracket_stays_with_the_last_sentence():
    sentence = "我们今天在全国所有地区都赢得了一场历史性的胜利，这是我们所有人共同努力的结果。"
    text = "他说：「" + sentence * 3 + "大家都很高兴。」然后他走了。"
    assert split_sentences(text, "zh") == ["他说：「" + sentence, sentence, sentence, "大家都很高兴。」", "然后他走了。"]
    assert split_sentences("他说：「我们赢了。大家都很高兴。」然后他走了。", "zh") == [
        "他说：「我们赢了。大家都很高兴。」", "然后他走了。"]  # a short quotation stays whole


def test_no_unit_of_the_quote_cases_is_longer_than_the_bound_where_a_sentence_ends_inside_it():
    from hmde.text.quotes import LONG_PIECE, width

    news = ('"\nMeanwhile, around 115,000 Royal Mail workers are voting on strike action in a similar row over pay.\n'
            "Communication Workers Union (CWU), which represents many Royal Mail staff, said the offer was not "
            "enough.\nPay rates and measures to help UK staff have been increasing as businesses have struggled to "
            "recruit.\nEarlier this month, Lloyds Bank staff were offered a lump sum to help with the cost of living.")
    units = split_sentences(news, "en")
    assert len(units) == 4 and all(width(u) <= LONG_PIECE for u in units)
