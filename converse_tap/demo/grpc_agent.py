"""The demo agent over gRPC (a2a-sdk's GrpcHandler on grpc.aio), over TLS with a self-signed certificate."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc
from a2a.compat.v0_3.grpc_handler import CompatGrpcHandler
from a2a.server.agent_execution import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.grpc_handler import GrpcHandler
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import a2a_pb2_grpc

from ..a2a.constants import CONVERSE_URI
from ..a2a.headers import split_uris
from .agent import ConverseExecutor, agent_card


def self_signed(host: str = "127.0.0.1") -> tuple[bytes, bytes]:
    """(key PEM, certificate PEM) for `host`, valid for a day: enough for a loopback demo or test."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    try:
        san: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        san = x509.DNSName(host)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([san]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return key_pem, cert.public_bytes(serialization.Encoding.PEM)


class EchoExtensions(grpc.aio.ServerInterceptor):
    """Echo the activated converse URI in the response's `a2a-extensions` metadata (the spec's activation signal;
    the a2a-sdk does not send it), as the HTTP demo's middleware does; for both the v1.0 and v0.3 services."""

    async def intercept_service(self, continuation: Any, details: Any) -> Any:
        handler = await continuation(details)
        asked = [v for k, v in details.invocation_metadata or () if k.lower() in ("a2a-extensions", "x-a2a-extensions")]
        if handler is None or CONVERSE_URI not in split_uris(v if isinstance(v, str) else v.decode() for v in asked):
            return handler
        echo = (("a2a-extensions", CONVERSE_URI),)
        if handler.unary_unary is not None:
            unary = handler.unary_unary

            async def unary_unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                await context.send_initial_metadata(echo)
                return await unary(request, context)

            return handler._replace(unary_unary=unary_unary)
        if handler.unary_stream is not None:
            stream = handler.unary_stream

            async def unary_stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                await context.send_initial_metadata(echo)
                async for item in stream(request, context):
                    yield item

            return handler._replace(unary_stream=unary_stream)
        return handler


@dataclass
class GrpcAgentServer:
    """One demo agent on a grpc.aio server at 127.0.0.1 (port 0: a free one), TLS with a self-signed certificate;
    the v1.0 service (`lf.a2a.v1.A2AService`) and the v0.3 one (`a2a.v1.A2AService`) side by side."""

    agent_id: str = "ag_trattoria01"
    name: str = "Trattoria Roma"
    executor: AgentExecutor | None = None
    host: str = "127.0.0.1"
    port: int = 0
    server: Any = None
    cert: bytes = b""

    @property
    def target(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self) -> None:
        key, self.cert = self_signed(self.host)
        self.server = grpc.aio.server(interceptors=[EchoExtensions()])
        creds = grpc.ssl_server_credentials([(key, self.cert)])
        self.port = self.server.add_secure_port(f"{self.host}:{self.port}", creds)
        handler = DefaultRequestHandler(
            agent_executor=self.executor or ConverseExecutor(),
            task_store=InMemoryTaskStore(),
            agent_card=agent_card(f"https://{self.target}", self.agent_id, self.name, self.target),
        )
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), self.server)
        a2a_v0_3_pb2_grpc.add_A2AServiceServicer_to_server(CompatGrpcHandler(handler), self.server)
        await self.server.start()

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop(grace=1)
