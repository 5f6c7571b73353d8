"""Partitions page: which nodes HTP and GPU claim, the classes, and the hot-migration plans."""

from dashboard.views import frame
from dashboard.views.partitions import render

frame.page("Partitions")
render()
