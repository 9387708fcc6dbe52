"""Pure A2A protocol knowledge: recognising exchanges, SSE framing, payload walking, the converse envelope."""
