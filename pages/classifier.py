"""Classifier page: the EP's backend_type=auto rules and the refined classifier, with evidence."""

from dashboard.views import frame
from dashboard.views.classifier import render

frame.page("Classifier")
render()
