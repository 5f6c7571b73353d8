"""Streamlit views: the only modules that import Streamlit.

``state`` holds the model the user selected (shared by every page), ``intake`` draws the sidebar
model picker, and each page module has a ``render()`` that ``pages/<name>.py`` calls.
"""
