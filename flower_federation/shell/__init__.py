"""The Pulumi shell: ComponentResources that register what `builders/` made, wiring Outputs,
secrets, providers and StackReferences. Nothing here decides what an object holds."""
