"""Data preparation: corpus reading, cleaning, SentencePiece, token-id storage."""
