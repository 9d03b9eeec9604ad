"""`nmt serve`'s library: request checks, the batching worker and the HTTP application."""
