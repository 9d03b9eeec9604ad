"""The attention encoder-decoder."""
