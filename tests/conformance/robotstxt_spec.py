"""Reader of Google's robots.txt conformance cases (``robotstxt_spec_test/``, see SOURCE.md there).

The cases are protobuf text files of ``specification.proto``; the message types are built here from
that schema with protobuf's own descriptor API and the files read with ``text_format`` (protobuf
comes with Ray), so the vendored files are read exactly as Google's Java runner reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format

HERE = Path(__file__).with_name("robotstxt_spec_test")
F = descriptor_pb2.FieldDescriptorProto


@dataclass(frozen=True)
class Case:
    file: str
    index: int  # test index in the file
    robotstxt: bytes
    url: str
    useragent: str
    allowed: bool
    google_specific: bool
    explanation: str


def _spec_class():
    fd = descriptor_pb2.FileDescriptorProto(name="specification.proto", package="specification", syntax="proto2")
    outcome = fd.enum_type.add(name="Outcome")
    for i, n in enumerate(("UNSPECIFIED", "ALLOWED", "DISALLOWED")):
        outcome.value.add(name=n, number=i)
    ttype = fd.enum_type.add(name="TestType")
    for i, n in enumerate(("STANDARD", "GOOGLE_SPECIFIC")):
        ttype.value.add(name=n, number=i)
    exp = fd.message_type.add(name="Expectation")
    exp.field.add(name="testurl", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    exp.field.add(name="useragent", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    exp.field.add(name="expected_outcome", number=3, type=F.TYPE_ENUM, label=F.LABEL_OPTIONAL,
                  type_name=".specification.Outcome")
    # bytes, not string as in the .proto: some explanations quote invalid UTF-8 (the wire format is the same)
    exp.field.add(name="additional_explanation", number=4, type=F.TYPE_BYTES, label=F.LABEL_OPTIONAL)
    exp.field.add(name="test_type", number=5, type=F.TYPE_ENUM, label=F.LABEL_OPTIONAL,
                  type_name=".specification.TestType")
    test = fd.message_type.add(name="RobotsTxtTest")
    test.field.add(name="robotstxt", number=1, type=F.TYPE_BYTES, label=F.LABEL_OPTIONAL)
    test.field.add(name="test_expectations", number=2, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                   type_name=".specification.Expectation")
    spec = fd.message_type.add(name="RobotsTxtSpecification")
    spec.field.add(name="tests", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                   type_name=".specification.RobotsTxtTest")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("specification.RobotsTxtSpecification"))


def cases() -> list[Case]:
    """Every expectation of every vendored file (correctness and stress), in file order."""
    spec_cls = _spec_class()
    out = []
    for path in sorted(HERE.glob("*/*.textproto")):
        spec = text_format.Parse(path.read_text(encoding="utf-8"), spec_cls())
        for i, test in enumerate(spec.tests):
            for e in test.test_expectations:
                out.append(Case(f"{path.parent.name}/{path.name}", i, test.robotstxt, e.testurl, e.useragent,
                                e.expected_outcome == 1, e.test_type == 1,
                                e.additional_explanation.decode("utf-8", "replace")))
    return out
