"""Code generator: Kafka-schema-language JSON in ``schemas/`` -> Python codecs (jinja2)."""
