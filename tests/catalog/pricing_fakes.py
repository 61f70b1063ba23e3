"""Recorded-shape AWS Pricing API products and a local server speaking its JSON protocol
(moto has no Pricing API); the same server serves an ECB reference-rate XML."""

from __future__ import annotations

import json
import zlib
from http.server import BaseHTTPRequestHandler


def ec2_product(itype: str, region: str, usd: str, effective: str = "2025-06-01T00:00:00Z") -> dict:
    """One AmazonEC2 product as GetProducts returns it (recorded shape, trimmed attributes)."""
    sku = f"SKU{zlib.crc32(f'{itype}/{region}'.encode()):010d}"
    return {
        "product": {
            "productFamily": "Compute Instance",
            "attributes": {
                "instanceType": itype,
                "instanceFamily": "GPU instance",
                "regionCode": region,
                "location": "US East (N. Virginia)",
                "locationType": "AWS Region",
                "operatingSystem": "Linux",
                "tenancy": "Shared",
                "preInstalledSw": "NA",
                "capacitystatus": "Used",
                "licenseModel": "No License required",
                "usagetype": f"BoxUsage:{itype}",
                "operation": "RunInstances",
                "marketoption": "OnDemand",
                "servicecode": "AmazonEC2",
            },
            "sku": sku,
        },
        "serviceCode": "AmazonEC2",
        "terms": {
            "OnDemand": {
                f"{sku}.JRTCKXETXF": {
                    "priceDimensions": {
                        f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                            "unit": "Hrs",
                            "endRange": "Inf",
                            "description": f"${usd} per On Demand Linux {itype} Instance Hour",
                            "appliesTo": [],
                            "beginRange": "0",
                            "pricePerUnit": {"USD": usd},
                        }
                    },
                    "sku": sku,
                    "effectiveDate": effective,
                    "offerTermCode": "JRTCKXETXF",
                    "termAttributes": {},
                }
            },
            "Reserved": {
                f"{sku}.38NPMPTW36": {
                    "priceDimensions": {
                        f"{sku}.38NPMPTW36.2TG2D8R56U": {
                            "unit": "Quantity",
                            "description": "Upfront Fee",
                            "pricePerUnit": {"USD": "9999"},
                        }
                    },
                    "termAttributes": {
                        "LeaseContractLength": "3yr",
                        "PurchaseOption": "All Upfront",
                    },
                }
            },
        },
        "version": "20250601000000",
        "publicationDate": "2025-06-01T00:00:00Z",
    }


def sagemaker_product(name: str, component: str, usd: str, region: str = "us-east-1") -> dict:
    """One AmazonSageMaker ML Instance product (component Training, Hosting, ...)."""
    short = {"Training": "Train", "Hosting": "Host", "Notebook": "Notebk"}[component]
    return {
        "product": {
            "productFamily": "ML Instance",
            "attributes": {
                "instanceType": f"{name}-{component}",
                "instanceName": name,
                "component": component,
                "regionCode": region,
                "usagetype": f"USE1-{short}:{name}",
                "operation": "RunInstance",
                "servicecode": "AmazonSageMaker",
            },
            "sku": f"SM{zlib.crc32(f'{name}/{component}'.encode()):010d}",
        },
        "serviceCode": "AmazonSageMaker",
        "terms": {
            "OnDemand": {
                "T1": {
                    "priceDimensions": {"D1": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}},
                    "effectiveDate": "2025-07-01T00:00:00Z",
                }
            }
        },
    }


class Handler(BaseHTTPRequestHandler):
    """Answers GetProducts from ``server.pages`` (NextToken paging) and GET /ecb*."""

    def do_POST(self):  # the Pricing API: JSON 1.1 protocol, X-Amz-Target names the operation
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        self.server.requests.append({"target": self.headers.get("X-Amz-Target"), **body})
        pages = self.server.pages.get(body.get("ServiceCode"), [[]])
        index = int(body["NextToken"].split("-")[1]) if body.get("NextToken") else 0
        answer = {"FormatVersion": "aws_v1", "PriceList": [json.dumps(p) for p in pages[index]]}
        if index + 1 < len(pages):
            answer["NextToken"] = f"page-{index + 1}-token"
        self._send(200, "application/x-amz-json-1.1", json.dumps(answer).encode())

    def do_GET(self):
        if self.path.startswith("/ecb"):
            self._send(200, "text/xml", self.server.ecb)
        else:
            self._send(404, "text/plain", b"not found")

    def _send(self, status: int, ctype: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-amzn-RequestId", "00000000-0000-0000-0000-000000000000")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):  # keep test output clean
        pass
