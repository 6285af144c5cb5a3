"""Measuring what a context extension buys: perplexity against length, passkey retrieval, sweeps, reports."""
