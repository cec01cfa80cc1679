"""The configuration registry and everything derived from it (bottom layer, beside protocol/).

Every broker, topic, coordinator and controller setting is defined once, in ``config.registry``; the
broker, DescribeConfigs, the CLI and ``docs/configs.md`` (``config.docs``) are views of it.
"""
