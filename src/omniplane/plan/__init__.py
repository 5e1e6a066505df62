"""Automated deployment planner (Cornfigurator)."""
