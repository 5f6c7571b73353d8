"""Devices page: this machine and Snapdragon devices over SSH, and what each can run."""

from dashboard.views import frame
from dashboard.views.devices import render

frame.page("Devices")
render()
