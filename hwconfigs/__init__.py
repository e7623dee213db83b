"""Hardware preset YAML files, installed as package data.

This folder is where users edit and copy presets from; it is a package only so that the
presets ship with the distribution and `simulator.hw.load_hw` finds them through
`importlib.resources` in any kind of install. It holds no code.
"""
