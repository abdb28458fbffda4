"""hmde in the frameworks users already build with: LangChain (:mod:`hmde.integrations.langchain`), LlamaIndex
(:mod:`hmde.integrations.llama_index`) and Haystack 2 (:mod:`hmde.integrations.haystack`). Each is a thin
translation onto :class:`hmde.Index` (a local index) or a server's ``/search`` and ``/embed``
(:mod:`hmde.integrations.client`): the ranking (best sentence fused with the document vector, the language
calibration), the evidence and the metadata filters are hmde's, never re-implemented."""
