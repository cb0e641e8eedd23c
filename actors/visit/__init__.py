"""The visit pipeline: parsing, the crawl-time stages and their chain, the batch decision and commit,
duplicates, and the writers of the archive and the summaries."""
