"""The evidence and what is measured of it: windows and cells, the typed input (evidence), a cell's figures as
measured and resampled (measure), intervals (stats)."""
