# Multi-stage, static, non-root image of coredns.
# Build from the repository root: docker build -f deploy/docker/coredns.Dockerfile -t mcs-dns/coredns:latest .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/coredns ./cmd/coredns

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/coredns /coredns
USER 65532:65532
ENTRYPOINT ["/coredns"]
