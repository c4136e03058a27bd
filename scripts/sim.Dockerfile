# servetune-sim: the simulated engine as a drop-in for the vllm/vllm-openai
# image. The container takes vLLM's arguments (--model M [flags]) and serves
# the OpenAI API on port 8000. Built by `make sim-image` (scripts/sim-image.sh)
# from a static binary; FROM scratch, so no registry is needed.
FROM scratch
COPY servetune /servetune
ENV SERVETUNE_SIM_GPU=H100-SXM
EXPOSE 8000
# `servetune sim serve` listens on 0.0.0.0:8000 by default, as vLLM does.
ENTRYPOINT ["/servetune", "sim", "serve"]
