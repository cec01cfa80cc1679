"""Channel security on the broker side: principals, TLS and SASL (Kafka's network/security layer)."""
