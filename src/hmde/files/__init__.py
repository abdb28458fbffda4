"""Documents as files: PDF, HTML, Word, Markdown and text files read with the libraries made for each (one module a
format), folders walked (folders.py), the places of a document's sentences (pages, sections: places.py), and the one
reading layer every door calls (inputs.py: files, folders and hmde's structured formats to documents)."""
