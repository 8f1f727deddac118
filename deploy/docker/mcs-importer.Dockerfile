# Multi-stage, static, non-root image of mcs-importer.
# Build from the repository root: docker build -f deploy/docker/mcs-importer.Dockerfile -t mcs-dns/mcs-importer:latest .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/mcs-importer ./cmd/mcs-importer

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/mcs-importer /mcs-importer
USER 65532:65532
ENTRYPOINT ["/mcs-importer"]
