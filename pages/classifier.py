"""Classifier page: the EP's backend_type=auto rules and the refined classifier, with evidence."""

from dashboard.views.classifier import render

render()
