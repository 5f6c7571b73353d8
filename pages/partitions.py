"""Partitions page: which nodes HTP and GPU claim, the classes, and the hot-migration plans."""

from dashboard.views.partitions import render

render()
