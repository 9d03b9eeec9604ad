"""Rendering for people (rich): tables, heatmaps, progress. Nothing here computes results."""
