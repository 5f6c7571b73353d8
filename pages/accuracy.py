"""Quantize & accuracy page: does the HTP give the right answer on your data, which layer breaks it, and what a
quantized model costs (HTP simulator figures here)."""

from dashboard.views import frame
from dashboard.views.accuracy import render

frame.page("Quantize & accuracy")
render()
