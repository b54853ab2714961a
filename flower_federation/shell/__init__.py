"""The Pulumi shell: ComponentResources that register what `build/` made, wiring Outputs,
secrets, providers and StackReferences. Nothing here decides what an object holds."""
